package generation

import (
	"compress/gzip"
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

// Read implements io.Reader.
func (g *gzipBody) Read(p []byte) (int, error) {
	if g.zr == nil && g.err == nil {
		g.zr, g.err = gzip.NewReader(g.body)
	}
	if g.err != nil {
		return 0, g.err
	}
	return g.zr.Read(p)
}

// Close closes the compressed body.
func (g *gzipBody) Close() error { return g.body.Close() }
