package jsonrepair

import (
	"fmt"
	"strings"
)

// scanner copies JSON text while tracking strings and nesting, fixing what it can. It stops
// after the first complete top-level object or array.
type scanner struct {
	text string
	pos  int
	out  []byte
	// stack holds the open "{" and "[".
	stack []byte
	// lastSig is the last significant byte written outside strings: a bracket, ':', ',',
	// '"' after a string, or 'w' after a word or number.
	lastSig byte
	// keyPending is set after an object key until its colon.
	keyPending bool
	// started is set once the first "{" or "[" was copied.
	started bool

	trailing, comments, stray, mismatched, commas     int
	singleQuoted, bareKeys, literals, controls, nulls int
	closedString                                      bool
	closers                                           string
}

// closerOf maps an opener to its closer.
var closerOf = map[byte]byte{'{': '}', '[': ']'}

// literalFixes maps the Python and JavaScript literals models write to JSON.
var literalFixes = map[string]string{"True": "true", "False": "false", "None": "null", "undefined": "null"}

// run scans the whole text.
func (s *scanner) run() {
	for s.pos < len(s.text) {
		if s.started && len(s.stack) == 0 {
			if rest := strings.TrimSpace(s.text[s.pos:]); rest != "" {
				s.trailing = len(rest)
			}
			return
		}
		c := s.text[s.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			s.out = append(s.out, c)
			s.pos++
		case c == '"':
			s.doubleQuoted()
		case c == '\'':
			s.singleQuotedString()
		case c == '{' || c == '[':
			s.stack = append(s.stack, c)
			s.emit(c)
			s.started = true
			s.pos++
		case c == '}' || c == ']':
			s.close(c)
			s.pos++
		case c == '/' && s.pos+1 < len(s.text) && (s.text[s.pos+1] == '/' || s.text[s.pos+1] == '*'):
			s.comment()
		case c == ':':
			s.emit(c)
			s.keyPending = false
			s.pos++
		case c == ',':
			s.completeValue()
			s.emit(c)
			s.pos++
		case isWordStart(c):
			s.word()
		default:
			s.out = append(s.out, c)
			s.lastSig = 'w'
			s.keyPending = false
			s.pos++
		}
	}
	s.finish()
}

// emit writes a structural byte.
func (s *scanner) emit(c byte) {
	s.out = append(s.out, c)
	s.lastSig = c
}

// atKey reports whether the scan is where an object key must come.
func (s *scanner) atKey() bool {
	return len(s.stack) > 0 && s.stack[len(s.stack)-1] == '{' && (s.lastSig == '{' || s.lastSig == ',')
}

// doubleQuoted copies a double-quoted string, escaping raw control characters and closing it
// at the end of the text.
func (s *scanner) doubleQuoted() {
	isKey := s.atKey()
	s.out = append(s.out, '"')
	s.pos++
	for s.pos < len(s.text) {
		c := s.text[s.pos]
		switch {
		case c == '\\' && s.pos+1 < len(s.text):
			s.out = append(s.out, c, s.text[s.pos+1])
			s.pos += 2
		case c == '\\':
			s.pos++ // a backslash ending the text escapes nothing
		case c == '"':
			s.out = append(s.out, c)
			s.pos++
			s.endString(isKey)
			return
		case c < 0x20:
			s.control(c)
			s.pos++
		default:
			s.out = append(s.out, c)
			s.pos++
		}
	}
	s.out = append(s.out, '"')
	s.closedString = true
	s.endString(isKey)
}

// singleQuotedString copies a single-quoted string as a double-quoted one. The closing quote
// is the first unescaped "'" followed by a delimiter (",", "}", "]", ":" or the end), so the
// apostrophe of "it's" stays inside.
func (s *scanner) singleQuotedString() {
	isKey := s.atKey()
	s.out = append(s.out, '"')
	s.pos++
	s.singleQuoted++
	for s.pos < len(s.text) {
		c := s.text[s.pos]
		switch {
		case c == '\\' && s.pos+1 < len(s.text) && s.text[s.pos+1] == '\'':
			s.out = append(s.out, '\'')
			s.pos += 2
		case c == '\\' && s.pos+1 < len(s.text):
			s.out = append(s.out, c, s.text[s.pos+1])
			s.pos += 2
		case c == '\\':
			s.pos++
		case c == '\'' && s.closesSingle(s.pos+1):
			s.out = append(s.out, '"')
			s.pos++
			s.endString(isKey)
			return
		case c == '"':
			s.out = append(s.out, '\\', '"')
			s.pos++
		case c < 0x20:
			s.control(c)
			s.pos++
		default:
			s.out = append(s.out, c)
			s.pos++
		}
	}
	s.out = append(s.out, '"')
	s.closedString = true
	s.endString(isKey)
}

// closesSingle reports whether a single quote before text[i:] ends its string.
func (s *scanner) closesSingle(i int) bool {
	rest := strings.TrimLeft(s.text[i:], " \t\r\n")
	return rest == "" || strings.IndexByte(",}]:", rest[0]) >= 0
}

// endString records the end of a string.
func (s *scanner) endString(isKey bool) {
	s.lastSig = '"'
	s.keyPending = isKey
}

// control writes a raw control character found inside a string as its escape.
func (s *scanner) control(c byte) {
	s.controls++
	switch c {
	case '\n':
		s.out = append(s.out, `\n`...)
	case '\t':
		s.out = append(s.out, `\t`...)
	case '\r':
		s.out = append(s.out, `\r`...)
	default:
		s.out = fmt.Appendf(s.out, `\u%04x`, c)
	}
}

// word copies a bare word: quoted when it is an object key followed by ":", mapped when it
// is a Python or JavaScript literal, unchanged otherwise.
func (s *scanner) word() {
	isKey := s.atKey()
	start := s.pos
	for s.pos < len(s.text) && (isWordStart(s.text[s.pos]) || isDigit(s.text[s.pos]) || (isKey && s.text[s.pos] == '-')) {
		s.pos++
	}
	w := s.text[start:s.pos]
	if isKey {
		if rest := strings.TrimLeft(s.text[s.pos:], " \t\r\n"); rest != "" && rest[0] == ':' {
			s.out = append(s.out, '"')
			s.out = append(s.out, w...)
			s.out = append(s.out, '"')
			s.bareKeys++
			s.endString(true)
			return
		}
	}
	if fixed, ok := literalFixes[w]; ok && !isKey {
		w = fixed
		s.literals++
	}
	s.out = append(s.out, w...)
	s.lastSig = 'w'
	s.keyPending = false
}

// comment skips a // line comment or a /* block */ comment.
func (s *scanner) comment() {
	s.comments++
	if s.text[s.pos+1] == '/' {
		end := strings.IndexByte(s.text[s.pos:], '\n')
		if end < 0 {
			s.pos = len(s.text)
			return
		}
		s.pos += end
		return
	}
	end := strings.Index(s.text[s.pos+2:], "*/")
	if end < 0 {
		s.pos = len(s.text)
		return
	}
	s.pos += 2 + end + 2
}

// close handles a closer: it completes a dangling key or colon, removes a trailing comma,
// closes inner openers it skips, and drops a closer that matches nothing open.
func (s *scanner) close(c byte) {
	match := -1
	for j := len(s.stack) - 1; j >= 0; j-- {
		if closerOf[s.stack[j]] == c {
			match = j
			break
		}
	}
	if match < 0 {
		s.stray++
		return
	}
	s.completeValue()
	s.dropTrailingComma()
	for len(s.stack)-1 > match {
		s.out = append(s.out, closerOf[s.pop()])
		s.mismatched++
	}
	s.pop()
	s.emit(c)
}

// finish closes what the text left open.
func (s *scanner) finish() {
	if len(s.stack) == 0 {
		return
	}
	s.out = []byte(strings.TrimRight(string(s.out), " \t\r\n"))
	s.completeValue()
	s.dropTrailingComma()
	var closers strings.Builder
	for len(s.stack) > 0 {
		closers.WriteByte(closerOf[s.pop()])
	}
	s.closers = closers.String()
	s.out = append(s.out, s.closers...)
}

// completeValue gives null to a key without a colon or a colon without a value.
func (s *scanner) completeValue() {
	switch {
	case s.keyPending:
		s.out = append(s.out, ":null"...)
		s.nulls++
	case s.lastSig == ':':
		s.out = append(s.out, "null"...)
		s.nulls++
	default:
		return
	}
	s.keyPending = false
	s.lastSig = 'w'
}

// dropTrailingComma removes a comma that ends the output, ignoring whitespace after it.
func (s *scanner) dropTrailingComma() {
	trimmed := strings.TrimRight(string(s.out), " \t\r\n")
	if strings.HasSuffix(trimmed, ",") {
		s.out = []byte(trimmed[:len(trimmed)-1])
		s.commas++
	}
}

func (s *scanner) pop() byte {
	c := s.stack[len(s.stack)-1]
	s.stack = s.stack[:len(s.stack)-1]
	return c
}

// steps describes the fixes the scan applied.
func (s *scanner) steps() []string {
	var steps []string
	add := func(n int, format string) {
		if n > 0 {
			steps = append(steps, fmt.Sprintf(format, n))
		}
	}
	add(s.trailing, "trimmed %d bytes of trailing text after the JSON value")
	add(s.comments, "removed %d comments")
	add(s.stray, "dropped %d unmatched closing brackets")
	add(s.mismatched, "closed %d brackets left open inside another")
	add(s.commas, "removed %d trailing commas")
	add(s.singleQuoted, "turned %d single-quoted strings into double-quoted ones")
	add(s.bareKeys, "quoted %d bare keys")
	add(s.literals, "replaced %d Python or JavaScript literals (True, False, None, undefined)")
	add(s.controls, "escaped %d control characters inside strings")
	if s.closedString {
		steps = append(steps, "closed an unterminated string")
	}
	add(s.nulls, "filled %d missing values with null")
	if s.closers != "" {
		steps = append(steps, fmt.Sprintf("appended the missing closers %q", s.closers))
	}
	return steps
}

func isWordStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
