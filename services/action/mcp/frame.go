package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/agentmesh/agentmesh/pkg/textcut"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxFrameBytes is the largest message a server may send: one line of JSON from a stdio server,
// one JSON body or SSE event from a remote one. It is the MCP Go SDK's limit of a stdio line
// (sdk.DefaultMaxLineLength), which its reader enforces by ending the whole connection; the
// SDK's streamable HTTP client has none. A stdio server's messages pass through a frameReader
// instead, a remote server's answers through a limitTransport, which replace one over the
// limit, unread, by an error answer to its request: only that call fails.
const MaxFrameBytes = sdk.DefaultMaxLineLength

// frameTooLargeCode is the JSON-RPC error code (one of those the specification leaves to
// implementations) of the answer a frameReader puts in place of a message over MaxFrameBytes.
const frameTooLargeCode = -32099

// frameReader reads a stdio server's newline-delimited messages, handing on each one whole
// once it is complete. A message over limit is read to its end and dropped, never held: a
// response is replaced by an error response to its request (frameTooLargeCode), a message
// that answers no request (a notification) is dropped without a word. A line that is no
// JSON-RPC message (isMessage: a banner, a log line the server printed on its stdout) is
// skipped and logged, as the MCP reference clients skip it: the SDK's reader ended the whole
// session on it.
type frameReader struct {
	r       *bufio.Reader
	limit   int
	buf     []byte // the message being read
	log     *slog.Logger
	skipped bool // a line was skipped already: the next ones are logged at debug level
	handOn
}

// newFrameReader returns a frameReader of r's messages of at most limit bytes, which logs the
// lines it skips to log.
func newFrameReader(r io.Reader, limit int, log *slog.Logger) *frameReader {
	return &frameReader{r: bufio.NewReader(r), limit: limit, log: log}
}

// Read hands on the messages read, whole, and then the error reading ended with.
func (f *frameReader) Read(p []byte) (int, error) { return f.read(p, f) }

// handOn is what a reader of whole messages (frameReader, eventReader) hands on: out, the
// message read, then, once it is all read, err, the error reading ended with.
type handOn struct {
	out []byte // what Read hands on next
	err error  // the error to return once out is empty
}

// read copies into p what is left of out, reading the next message from src (which sets out,
// or err) while out is empty.
func (h *handOn) read(p []byte, src interface{ next() }) (int, error) {
	for len(h.out) == 0 {
		if h.err != nil {
			return 0, h.err
		}
		src.next()
	}
	n := copy(p, h.out)
	h.out = h.out[n:]
	return n, nil
}

// next reads the next message into out, or what the stream ended with into out and err.
func (f *frameReader) next() {
	f.buf = f.buf[:0]
	for {
		chunk, err := f.r.ReadSlice('\n')
		if len(f.buf)+len(chunk) > f.limit {
			f.out, f.err = f.tooLarge(chunk, err)
			return
		}
		f.buf = append(f.buf, chunk...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case !isMessage(f.buf):
			f.skip()
			if err == nil {
				continue // the next line
			}
			f.out, f.err = nil, err
			return
		case err == nil:
			f.out = f.buf
			return
		default: // the stream ended: hand on what came, then the error
			f.out, f.err = f.buf, err
			return
		}
	}
}

// maxSkippedBytes is how much of a skipped line is logged.
const maxSkippedBytes = 256

// skip drops the line in buf, logging it unless it is blank: at warning level the first time
// (the server breaks the protocol, and its operator should know), at debug level after.
func (f *frameReader) skip() {
	line := bytes.TrimSpace(f.buf)
	f.buf = f.buf[:0]
	if len(line) == 0 {
		return
	}
	shown := string(line[:textcut.Boundary(string(line), maxSkippedBytes)])
	level := slog.LevelWarn
	if f.skipped {
		level = slog.LevelDebug
	}
	f.skipped = true
	f.log.Log(context.Background(), level, "MCP server printed a line that is no MCP message "+
		"on its stdout; skipped", "line", shown, "bytes", len(line))
}

// isMessage reports whether line, a line of a stdio server's stdout, is a JSON-RPC message
// (an object whose "jsonrpc" is "2.0") or a batch of them (a JSON array), what the SDK reads.
func isMessage(line []byte) bool {
	line = bytes.TrimSpace(line)
	switch {
	case len(line) == 0:
		return false
	case line[0] == '[':
		return json.Valid(line)
	case line[0] != '{':
		return false
	}
	var msg struct {
		JSONRPC string `json:"jsonrpc"`
	}
	return json.Unmarshal(line, &msg) == nil && msg.JSONRPC == "2.0"
}

// tooLarge reads the rest of a message over the limit, whose first bytes are buf and chunk
// (which ReadSlice returned with err), and returns the error response that replaces it, or
// nothing when it answers no request, and the error the stream ended with, if it did.
func (f *frameReader) tooLarge(chunk []byte, err error) ([]byte, error) {
	var id idScanner
	id.feed(f.buf)
	id.feed(chunk)
	size := len(f.buf) + len(chunk)
	f.buf = f.buf[:0]
	for errors.Is(err, bufio.ErrBufferFull) {
		chunk, err = f.r.ReadSlice('\n')
		id.feed(chunk)
		size += len(chunk)
	}
	// A request of the server's carries an id of the server's numbering, not a call's.
	answers := id.answerID()
	if answers == nil {
		return nil, err
	}
	return append(tooLargeAnswer(answers, size, f.limit, "a stdio MCP message"), '\n'), err
}

// tooLargeAnswer returns the JSON-RPC error answer to the request whose id is id that replaces
// its answer, a message of size bytes or more over limit, the limit of what ("a stdio MCP
// message").
func tooLargeAnswer(id []byte, size, limit int, what string) []byte {
	msg := fmt.Sprintf("the answer is a message of %d bytes or more, over the limit of %s "+
		"(%d bytes); the call failed, and the session goes on", size, what, limit)
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`,
		id, frameTooLargeCode, msg)
}

// isFrameTooLarge reports whether err is the error answer a frameReader put in place of a
// message over its limit.
func isFrameTooLarge(err error) bool {
	var wire *jsonrpc.Error
	return errors.As(err, &wire) && wire.Code == frameTooLargeCode
}

// frameTooLargeMessage is the message of such an answer.
func frameTooLargeMessage(err error) string {
	var wire *jsonrpc.Error
	errors.As(err, &wire)
	return wire.Message
}
