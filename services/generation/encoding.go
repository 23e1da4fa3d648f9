package generation

import (
	"compress/flate"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"strings"
)

// acceptEncoding is the Accept-Encoding of every request to a provider. The endpoint asks for
// gzip and decodes it itself (decodeBody) rather than leave both to net/http: a transport
// that adds the header itself gives each HTTP/1.1 request a header map of its own, some
// 0.4 KiB held for as long as the model takes (issue 15). Configured headers may set another.
const acceptEncoding = "gzip"

// decodeBody makes resp's body read decoded when the provider compressed it with gzip, as
// net/http does for a request it asked gzip for: the response then has no Content-Encoding
// or Content-Length, and Uncompressed is set. It returns the encoding of a response
// compressed otherwise (configured headers may ask for another), which it cannot decode; ""
// when the body reads as it is.
func decodeBody(resp *http.Response) (unknown string) {
	encoding := strings.TrimSpace(resp.Header.Get("Content-Encoding"))
	switch {
	case resp.Uncompressed, encoding == "", strings.EqualFold(encoding, "identity"):
		return ""
	case !strings.EqualFold(encoding, "gzip"):
		return encoding
	}
	resp.Body = &gzipBody{body: resp.Body}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.Uncompressed = true
	return ""
}

// gzipBody decodes a gzip-compressed body. Its reader is made at the first Read, since making
// it reads the gzip header, which a streaming provider may send only with its first event.
type gzipBody struct {
	body io.ReadCloser
	zr   *gzip.Reader
	err  error
}

// Read implements io.Reader. A body that is not gzip fails with *encodingError.
func (g *gzipBody) Read(p []byte) (int, error) {
	if g.zr == nil && g.err == nil {
		g.zr, g.err = gzip.NewReader(g.body)
		g.err = notGzip(g.err)
	}
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.zr.Read(p)
	return n, notGzip(err)
}

// encodingError is the failure to decode a body that is not the gzip its Content-Encoding
// says: the provider answered, but not with what it said (BAD_RESPONSE, decodeFailure).
type encodingError struct{ err error }

// Error returns the decoder's message.
func (e *encodingError) Error() string { return e.err.Error() }

// Unwrap returns the decoder's failure.
func (e *encodingError) Unwrap() error { return e.err }

// notGzip makes err an *encodingError when it says the data is not gzip (a bad header or
// checksum, a corrupt deflate stream); failures to read the body itself stay as they are.
func notGzip(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	var corrupt flate.CorruptInputError
	if errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) || errors.As(err, &corrupt) {
		return &encodingError{err: err}
	}
	return err
}

// decodeFailure is the BAD_RESPONSE failure of a body that did not decode, or nil when err
// is not one (encodingError).
func (e *endpoint) decodeFailure(err error) error {
	var eerr *encodingError
	if !errors.As(err, &eerr) {
		return nil
	}
	return e.badResponse("the answer is not the gzip its Content-Encoding says (%v)", eerr.err)
}

// Close closes the compressed body.
func (g *gzipBody) Close() error { return g.body.Close() }
