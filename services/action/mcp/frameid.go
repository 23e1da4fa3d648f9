package mcp

// maxIDBytes is the longest JSON-RPC id an idScanner captures; the client's ids are numbers.
const maxIDBytes = 64

// maxKeyBytes is how much of a top-level key an idScanner captures: enough to tell "method"
// from a longer key.
const maxKeyBytes = len("method") + 1

// idScanner finds the top-level "id" of a JSON object fed to it in pieces, and whether the
// object is a request (it has a "method") or an answer (a "result" or an "error"), holding
// nothing but the id: the message it scans may be of any size.
type idScanner struct {
	depth     int
	inString  bool
	escaped   bool
	wantKey   bool   // at depth 1, the next string is a key
	inKey     bool   // the string being read is a key at depth 1
	key       []byte // the key being read (its first bytes)
	isID      bool   // the last key read was "id"
	inID      bool   // reading the id's value
	id        []byte
	done      bool // the id was read
	tooLong   bool // the id was longer than maxIDBytes
	request   bool // a top-level "method" was read
	kindKnown bool // a top-level "method", "result" or "error" was read
}

// feed scans the next bytes of the message.
func (s *idScanner) feed(p []byte) {
	for _, c := range p {
		if s.done && s.kindKnown || s.tooLong {
			return // the rest cannot change the answer
		}
		if s.inID && !s.done {
			if !s.inString && s.depth == 1 && (c == ',' || c == '}') {
				s.done, s.inID = true, false
			} else if c != ' ' && c != '\t' && c != '\r' && c != '\n' || s.inString {
				if len(s.id) == maxIDBytes {
					s.tooLong = true
				} else {
					s.id = append(s.id, c)
				}
			}
		}
		s.step(c)
	}
}

// step moves the scanner's state over byte c.
func (s *idScanner) step(c byte) {
	if s.inString {
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
			if s.inKey {
				s.endKey()
			}
			return
		}
		if s.inKey && len(s.key) < maxKeyBytes {
			s.key = append(s.key, c)
		}
		return
	}
	switch c {
	case '"':
		s.inString = true
		if s.depth == 1 && s.wantKey {
			s.inKey, s.wantKey, s.key = true, false, s.key[:0]
		}
	case '{', '[':
		s.depth++
		s.wantKey = c == '{' && s.depth == 1
	case '}', ']':
		s.depth--
	case ',':
		s.wantKey = s.depth == 1
	case ':':
		if s.depth == 1 && s.isID && !s.done {
			s.inID, s.isID = true, false
		}
	}
}

// endKey notes what the top-level key just read says.
func (s *idScanner) endKey() {
	s.inKey = false
	s.isID = string(s.key) == "id"
	switch string(s.key) {
	case "method":
		s.request, s.kindKnown = true, true
	case "result", "error":
		s.kindKnown = true
	}
}

// answerID returns the id of an answer (a message with no "method"), as value does, or nil.
func (s *idScanner) answerID() []byte {
	if s.request {
		return nil
	}
	return s.value()
}

// value returns the id's JSON, or nil when the message has none (or one too long to be the
// client's).
func (s *idScanner) value() []byte {
	if !s.done || s.tooLong || len(s.id) == 0 {
		return nil
	}
	return s.id
}
