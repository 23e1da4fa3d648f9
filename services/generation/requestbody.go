package generation

import (
	"errors"
	"io"
	"sync"
)

// requestBody is the encoded body of a request to a provider: the whole conversation and the
// tools' schemas, some kilobytes to hundreds of them. The HTTP client reads it for every
// attempt (go-retryablehttp's retries; net/http's own resend on a connection the server closed
// before it read the request) until a response is in, but the request it sent, which the
// response keeps, still references its body while a streamed answer comes in, for as long as
// the model writes. release drops the body then, so that a run whose answer is streaming does
// not hold its conversation encoded in the generation stage (issue 15). go-retryablehttp's own
// []byte body cannot be dropped: its request's GetBody reads the slice again.
//
// A body with releaseSent is released as soon as an attempt has read all of it, for a request
// that nothing sends again once it is written: over HTTP/1.1 (net/http resends only a request of
// which it wrote nothing, or an idempotent one, which a POST is not) and without
// go-retryablehttp's retries. A run waiting for a local model server's answer then does not hold
// its conversation encoded either; should net/http want to resend it all the same, the attempt
// fails with errBodyReleased, which the orchestrator's attempts retry. Over HTTP/2 the transport
// resends a request whose stream the server refused, body and all, so there the body stays
// until the response is in.
type requestBody struct {
	mu          sync.Mutex
	data        []byte // nil once released
	releaseSent bool
}

// errBodyReleased is what an attempt to read a released body again gets.
var errBodyReleased = errors.New("the request's body was released once sent, and is not sent again")

// reader returns a reader of the whole body (go-retryablehttp's ReaderFunc): one per attempt.
// Once the body is released, the reader it returns fails its first read (releasedReader), not
// reader itself: net/http asks for the body of a 307 or 308 redirect's request before it asks
// CheckRedirect whether to follow it, and failing there made the redirect, which
// refuseRedirect refuses, a failure to reach the provider.
func (b *requestBody) reader() (io.Reader, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.data == nil {
		return releasedReader{}, nil
	}
	r := &onceReader{data: b.data}
	if b.releaseSent {
		r.sent = b.release
	}
	return r, nil
}

// release drops the body: no attempt reads it again.
func (b *requestBody) release() {
	b.mu.Lock()
	b.data = nil
	b.mu.Unlock()
}

// onceReader reads data once and drops it at its end, so that the request reading it does not
// keep it alive; sent, if any, is called then. Len gives go-retryablehttp the request's
// Content-Length.
type onceReader struct {
	data []byte
	sent func()
}

// Read implements io.Reader.
func (r *onceReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		r.end()
		return 0, io.EOF
	}
	n := copy(p, r.data)
	if r.data = r.data[n:]; len(r.data) == 0 {
		r.end()
	}
	return n, nil
}

// end drops the data once all of it is read, and calls sent.
func (r *onceReader) end() {
	r.data = nil
	if sent := r.sent; sent != nil {
		r.sent = nil
		sent()
	}
}

// Len is how many bytes are left to read.
func (r *onceReader) Len() int { return len(r.data) }

// releasedReader is the body of an attempt made after the body was released: reading it fails
// with errBodyReleased.
type releasedReader struct{}

// Read implements io.Reader.
func (releasedReader) Read([]byte) (int, error) { return 0, errBodyReleased }
