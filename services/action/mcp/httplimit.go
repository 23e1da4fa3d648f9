package mcp

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// httpMessage names the limit of a remote server's message in the errors that quote it.
const httpMessage = "an MCP message over HTTP"

// limitTransport bounds what a remote server's answers make the action stage hold: an SSE
// event (eventReader) or a body that is not a stream (limitedBody) over limit is replaced,
// unread, by an error answer to its call (frameTooLargeCode), so that only that call fails.
// The SDK's streamable HTTP client reads either whole, of any size (it leaves
// StreamableClientTransport.MaxEventSize's zero unresolved: no limit), and would end the whole
// connection on a body it failed to read.
type limitTransport struct {
	base  http.RoundTripper
	limit int
}

// RoundTrip sends req and returns its response with its body bounded.
func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case media == "text/event-stream":
		resp.Body = newEventReader(resp.Body, t.limit)
	case resp.ContentLength < 0 || resp.ContentLength > int64(t.limit):
		// net/http ends a body of a known length within the limit at that length.
		resp.Body = &limitedBody{body: resp.Body, req: req, limit: t.limit,
			size: resp.ContentLength}
		resp.ContentLength = -1
	}
	return resp, nil
}

// limitedBody is a remote server's answer that is not an SSE stream, of unknown length or one
// over limit: its first Read reads it whole, up to the limit; one over the limit is closed
// unread and replaced by an error answer to the request it answers (req's body is the one
// message the SDK's client sends), or an error when req is not a call.
type limitedBody struct {
	body  io.ReadCloser
	req   *http.Request
	limit int
	size  int64 // the Content-Length, or -1
	read  bool  // the first Read happened
	out   []byte
	err   error // the error to return once out is empty
}

// Read hands on the body, or what replaces it, and then io.EOF or the error reading ended with.
func (b *limitedBody) Read(p []byte) (int, error) {
	if !b.read {
		b.read = true
		b.fill()
	}
	if len(b.out) == 0 {
		return 0, b.err
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

// Close closes the body.
func (b *limitedBody) Close() error { return b.body.Close() }

// fill reads the body into out, or what replaces it.
func (b *limitedBody) fill() {
	size := b.size
	if size <= int64(b.limit) {
		data, err := io.ReadAll(io.LimitReader(b.body, int64(b.limit)+1))
		if err != nil || len(data) <= b.limit {
			b.out, b.err = data, err
			if err == nil {
				b.err = io.EOF
			}
			return
		}
		size = int64(len(data))
	}
	id := callID(b.req)
	if id == nil {
		b.err = fmt.Errorf("the answer is %d bytes or more, over the limit of %s (%d bytes)",
			size, httpMessage, b.limit)
		return
	}
	b.out, b.err = tooLargeAnswer(id, int(size), b.limit, httpMessage), io.EOF
}

// callID returns the JSON of the id of the call req's body holds, or nil when it holds none (a
// notification, an answer, or a request with no body).
func callID(req *http.Request) []byte {
	if req.GetBody == nil {
		return nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil
	}
	defer body.Close()
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.NewDecoder(body).Decode(&msg) != nil || msg.Method == "" || len(msg.ID) == 0 ||
		string(msg.ID) == "null" {
		return nil
	}
	return msg.ID
}
