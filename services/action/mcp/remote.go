package mcp

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/services/action/internal/origin"
)

// headerTransport adds fixed headers to every request to one origin.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	// origin is the scheme and host (with port) of the server's URL: the headers, which may
	// hold its credentials, go with requests there only (origin.Same), not with one a redirect
	// sends elsewhere.
	origin url.URL
}

// RoundTrip sends a copy of req with the headers set, or req as it is when it goes to another
// origin.
func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) == 0 || !origin.Same(req.URL, &t.origin) {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	return t.base.RoundTrip(req)
}

// newHTTPClient returns the client of the remote server at endpoint, on its own connection
// pool so that closing the server closes its connections, which sends headers to the
// endpoint's origin, bounds the server's messages at MaxFrameBytes (limitTransport) and fails
// a call the server did not take as such (busyTransport).
func newHTTPClient(endpoint string, headers map[string]string) (*http.Client, *http.Transport) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	t := &headerTransport{base: base, headers: headers}
	if u, err := url.Parse(endpoint); err == nil {
		t.origin = url.URL{Scheme: u.Scheme, Host: u.Host}
	}
	busy := &busyTransport{base: t}
	return &http.Client{Transport: &limitTransport{base: busy, limit: MaxFrameBytes}}, base
}

// urlRedactor returns the function that replaces a remote server's endpoint, in every form an
// error quotes it (as configured, as parsed, with its password masked), by its scheme and host:
// a hosted server's URL often carries a credential in its path or query, and the errors of
// calls reach the model, the run's events and the logs.
func urlRedactor(endpoint string) func(string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return func(s string) string { return strings.ReplaceAll(s, endpoint, "<the server's URL>") }
	}
	shown := u.Scheme + "://" + u.Host
	if strings.TrimSuffix(endpoint, "/") != shown {
		shown += "/…"
	}
	forms := []string{endpoint, u.String(), u.Redacted()}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) }) // the longest match wins
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, shown)
	}
	return strings.NewReplacer(pairs...).Replace
}

// redactedError is an error whose message has a remote server's URL redacted; it wraps the
// original, so errors.Is and errors.As still see it.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact returns err with the server's URL redacted from its message (err itself for a stdio
// server, or when the message does not quote it).
func (s *server) redact(err error) error {
	if err == nil || s.redactURL == nil {
		return err
	}
	msg := err.Error()
	if redacted := s.redactURL(msg); redacted != msg {
		return &redactedError{msg: redacted, err: err}
	}
	return err
}
