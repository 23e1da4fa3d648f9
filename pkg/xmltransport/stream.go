package xmltransport

import "strings"

// Piece is a part of streamed text: plain text, or one whole transport tag.
type Piece struct {
	// Text is the text of the piece; for a tag, from "<ai-agent-" through its closing tag.
	Text string
	// Tag is set for a transport tag of the session's nonce.
	Tag bool
	// Unclosed is set on a tag Flush returns because the stream ended before its closing
	// tag (only with Tag).
	Unclosed bool
}

// Stream buffers streamed answer text for the transport: plain text passes through at once,
// but from the first byte that may begin an opening tag of the nonce the text is held until
// it either cannot be such a tag (and is released as text) or the matching closing tag
// arrives (and the whole tag is released as one piece). Content outside tags is for display
// only; tags are read with Parse on the complete answer.
type Stream struct {
	open     string // "<ai-agent-NONCE-"
	held     string
	inTag    bool
	closeTag string // set once the held tag's opening tag is complete
}

// NewStream returns a buffer for the nonce's tags.
func NewStream(nonce string) *Stream {
	return &Stream{open: "<" + tagPrefix + nonce + "-"}
}

// Write adds the next fragment of streamed text and returns the pieces that are complete.
func (s *Stream) Write(fragment string) []Piece {
	s.held += fragment
	var out []Piece
	for {
		if !s.inTag {
			i := strings.Index(s.held, s.open)
			if i < 0 {
				keep := partialSuffix(s.held, s.open)
				out = appendText(out, s.held[:len(s.held)-keep])
				s.held = s.held[len(s.held)-keep:]
				return out
			}
			out = appendText(out, s.held[:i])
			s.held = s.held[i:]
			s.inTag = true
		}
		if s.closeTag == "" {
			gt := strings.IndexByte(s.held, '>')
			if gt < 0 {
				return out
			}
			name := strings.TrimPrefix(s.held[:gt], "<")
			if k := strings.IndexAny(name, " \t\r\n"); k >= 0 {
				name = name[:k]
			}
			s.closeTag = "</" + name + ">"
		}
		end := strings.Index(s.held, s.closeTag)
		if end < 0 {
			return out
		}
		end += len(s.closeTag)
		out = append(out, Piece{Text: s.held[:end], Tag: true})
		s.held = s.held[end:]
		s.inTag, s.closeTag = false, ""
	}
}

// Flush ends the stream and returns what is still held: an unfinished tag (Unclosed), or
// text that looked like the start of a tag.
func (s *Stream) Flush() []Piece {
	held, inTag := s.held, s.inTag
	s.held, s.inTag, s.closeTag = "", false, ""
	switch {
	case held == "":
		return nil
	case inTag:
		return []Piece{{Text: held, Tag: true, Unclosed: true}}
	}
	return []Piece{{Text: held}}
}

// appendText appends a text piece unless it is empty.
func appendText(out []Piece, text string) []Piece {
	if text == "" {
		return out
	}
	return append(out, Piece{Text: text})
}

// partialSuffix is the length of the longest suffix of text that is a proper prefix of tag.
func partialSuffix(text, tag string) int {
	for n := min(len(text), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(text, tag[:n]) {
			return n
		}
	}
	return 0
}
