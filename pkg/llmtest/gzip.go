package llmtest

import (
	"compress/gzip"
	"net/http"
	"strings"
)

// acceptsGzip reports whether r asks for gzip in its Accept-Encoding.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, _, _ := strings.Cut(part, ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			return true
		}
	}
	return false
}

// gzipWriter compresses a response with gzip, as a provider behind a compressing proxy sends
// it: Content-Encoding is gzip (net/http counts any Content-Length from the compressed bytes
// it is given). A flush sends what is written so far, so server-sent events still arrive one
// by one. Close ends the compressed stream.
type gzipWriter struct {
	http.ResponseWriter
	zw *gzip.Writer
}

// newGzipWriter compresses what is written to w.
func newGzipWriter(w http.ResponseWriter) *gzipWriter {
	w.Header().Set("Content-Encoding", "gzip")
	w.Header().Add("Vary", "Accept-Encoding")
	return &gzipWriter{ResponseWriter: w, zw: gzip.NewWriter(w)}
}

// Write implements http.ResponseWriter.
func (g *gzipWriter) Write(p []byte) (int, error) { return g.zw.Write(p) }

// FlushError sends what is written so far (http.ResponseController's Flush).
func (g *gzipWriter) FlushError() error {
	if err := g.zw.Flush(); err != nil {
		return err
	}
	return http.NewResponseController(g.ResponseWriter).Flush()
}

// Unwrap is the response writer compressed to (http.ResponseController's Hijack).
func (g *gzipWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// Close writes the end of the compressed stream.
func (g *gzipWriter) Close() error { return g.zw.Close() }
