package mcp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// eventReader reads a remote server's SSE stream, handing on each event whole once it is
// complete (a blank line ends it). An event over limit is read to its end and dropped, never
// held: one that answers a call is replaced by an error answer to it (frameTooLargeCode), any
// other (a notification, a request of the server's) is dropped without a word.
type eventReader struct {
	body  io.ReadCloser
	r     *bufio.Reader
	limit int
	buf   []byte // the event being read
	handOn
}

// newEventReader returns an eventReader of body's events of at most limit bytes.
func newEventReader(body io.ReadCloser, limit int) *eventReader {
	return &eventReader{body: body, r: bufio.NewReader(body), limit: limit}
}

// Read hands on the events read, whole, and then the error reading ended with.
func (e *eventReader) Read(p []byte) (int, error) { return e.read(p, e) }

// Close closes the stream.
func (e *eventReader) Close() error { return e.body.Close() }

// next reads the next event into out, or what the stream ended with into out and err.
func (e *eventReader) next() {
	e.buf = e.buf[:0]
	line := 0 // where the line being read starts in buf
	for {
		chunk, err := e.r.ReadSlice('\n')
		if len(e.buf)+len(chunk) > e.limit {
			e.out, e.err = e.tooLarge(chunk, err)
			return
		}
		e.buf = append(e.buf, chunk...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil: // the stream ended: hand on what came, then the error
			e.out, e.err = e.buf, err
			return
		case len(bytes.TrimRight(e.buf[line:], "\r\n")) == 0: // a blank line ends the event
			e.out = e.buf
			return
		}
		line = len(e.buf)
	}
}

// tooLarge reads the rest of an event over the limit, whose first bytes are buf and chunk
// (which ReadSlice returned with err), and returns the event that replaces it, or nothing when
// it answers no call, and the error the stream ended with, if it did.
func (e *eventReader) tooLarge(chunk []byte, err error) ([]byte, error) {
	var s eventScanner
	s.feed(e.buf)
	s.feed(chunk)
	size := len(e.buf) + len(chunk)
	e.buf = e.buf[:0]
	for !s.ended && (err == nil || errors.Is(err, bufio.ErrBufferFull)) {
		chunk, err = e.r.ReadSlice('\n')
		s.feed(chunk)
		size += len(chunk)
	}
	if errors.Is(err, bufio.ErrBufferFull) {
		err = nil
	}
	id := s.id.answerID()
	if id == nil {
		return nil, err
	}
	return fmt.Appendf(nil, "data: %s\n\n", tooLargeAnswer(id, size, e.limit, httpMessage)), err
}

// eventScanner feeds the data of an SSE event, given in pieces, to an idScanner, and notes the
// blank line that ends the event.
type eventScanner struct {
	id    idScanner
	head  [len("data")]byte // the line's first bytes, until its field is known
	n     int               // the bytes of head read
	field eventField        // the field of the line being read
	data  bool              // a data line was fed: the next one follows a newline
	ended bool              // a blank line ended the event
}

// eventField is the field of a line of an SSE event.
type eventField int

// The fields an eventScanner tells apart.
const (
	fieldUnknown eventField = iota // its name is being read
	fieldData                      // data, fed to the idScanner
	fieldOther                     // any other, or a comment
)

// newline joins an event's data lines.
var newline = []byte{'\n'}

// feed scans the next bytes of the event.
func (s *eventScanner) feed(p []byte) {
	for len(p) > 0 && !s.ended {
		if s.field != fieldUnknown {
			end := bytes.IndexByte(p, '\n')
			value := p
			if end >= 0 {
				value = p[:end]
			}
			if s.field == fieldData {
				s.id.feed(value)
			}
			if end < 0 {
				return
			}
			p = p[end+1:]
			s.field, s.n = fieldUnknown, 0
			continue
		}
		c := p[0]
		p = p[1:]
		switch {
		case c == '\n':
			s.ended = s.n == 0 || s.n == 1 && s.head[0] == '\r'
			s.n = 0
		case c == ':' && string(s.head[:s.n]) == "data":
			s.field = fieldData
			if s.data {
				s.id.feed(newline)
			}
			s.data = true
		case c == ':' || s.n == len(s.head):
			s.field = fieldOther
		default:
			s.head[s.n] = c
			s.n++
		}
	}
}
