package mcp

// maxIDBytes is the longest JSON-RPC id an idScanner captures; the client's ids are numbers.
const maxIDBytes = 64

// idScanner finds the top-level "id" of a JSON object fed to it in pieces, holding nothing but
// the id: the message it scans may be of any size.
type idScanner struct {
	depth    int
	inString bool
	escaped  bool
	wantKey  bool   // at depth 1, the next string is a key
	inKey    bool   // the string being read is a key at depth 1
	key      []byte // the key being read (its first bytes)
	isID     bool   // the last key read was "id"
	inID     bool   // reading the id's value
	id       []byte
	done     bool // the id was read
	tooLong  bool // the id was longer than maxIDBytes
}

// feed scans the next bytes of the message.
func (s *idScanner) feed(p []byte) {
	for _, c := range p {
		if s.done || s.tooLong {
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
				s.inKey, s.isID = false, string(s.key) == "id"
			}
			return
		}
		if s.inKey && len(s.key) < 3 {
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

// value returns the id's JSON, or nil when the message has none (or one too long to be the
// client's).
func (s *idScanner) value() []byte {
	if !s.done || s.tooLong || len(s.id) == 0 {
		return nil
	}
	return s.id
}
