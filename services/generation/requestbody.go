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
type requestBody struct {
	mu   sync.Mutex
	data []byte // nil once released
}

// errBodyReleased is what an attempt to read a released body again gets.
var errBodyReleased = errors.New("the request's body was released once its response came in")

// reader returns a reader of the whole body (go-retryablehttp's ReaderFunc): one per attempt.
func (b *requestBody) reader() (io.Reader, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.data == nil {
		return nil, errBodyReleased
	}
	return &onceReader{data: b.data}, nil
}

// release drops the body: no attempt reads it again.
func (b *requestBody) release() {
	b.mu.Lock()
	b.data = nil
	b.mu.Unlock()
}

// onceReader reads data once and drops it at its end, so that the request reading it does not
// keep it alive. Len gives go-retryablehttp the request's Content-Length.
type onceReader struct{ data []byte }

// Read implements io.Reader.
func (r *onceReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		r.data = nil
		return 0, io.EOF
	}
	n := copy(p, r.data)
	if r.data = r.data[n:]; len(r.data) == 0 {
		r.data = nil
	}
	return n, nil
}

// Len is how many bytes are left to read.
func (r *onceReader) Len() int { return len(r.data) }
