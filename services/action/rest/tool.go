package rest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/retryafter"
	"github.com/agentmesh/agentmesh/pkg/textcut"
	"github.com/agentmesh/agentmesh/services/action/internal/origin"
)

// Limits of a call.
const (
	// MaxResponseBytes is the largest response body a tool returns; a larger one is an error.
	MaxResponseBytes = 8 << 20
	// excerptBytes is how much of a failed response's body an error quotes.
	excerptBytes = 512
)

// ErrTransient marks failures worth retrying: a connection that could not be made, and the
// statuses 429, 502, 503 and 504. Those of 502 and 504 also wrap ErrMayHaveRun.
var ErrTransient = errors.New("transient HTTP failure")

// ErrMayHaveRun marks transient failures after which the server may have processed the
// request: a gateway's 502 or 504, which it may answer after passing the request on. Such a
// request may be sent again only when running it twice does no harm: its method is safe
// (Tool.Writes is false) or the tool is idempotent. A 429 or 503 says the server did not
// process the request, and does not wrap it.
var ErrMayHaveRun = errors.New("the HTTP request may have been processed")

// ErrNotSent marks failures that happened before the request reached the server: a
// connection that could not be made.
var ErrNotSent = errors.New("HTTP request not sent")

// UserHeader is the request header that names the user a call acts for, when one is known: an
// API that serves many users reads it there rather than trusting a user the model put in the
// arguments. A tool's configuration may not set it.
const UserHeader = "X-Agentmesh-User"

// ApproverHeader is the request header that names who approved a call of a tool that requires
// approval, as the orchestrator's approval grant signs it, so that the API (and its audit)
// knows who let the call through. A tool's configuration may not set it.
const ApproverHeader = "X-Agentmesh-Approver"

// identityHeaders are the headers the action stage sets and a tool's configuration may not.
var identityHeaders = []string{UserHeader, ApproverHeader}

// Principals are who a call acts for and who approved it; "" is none.
type Principals struct {
	// User is the user the call acts for, sent in UserHeader.
	User string
	// Approver is who approved the call, sent in ApproverHeader.
	Approver string
}

// Spec describes a REST tool's request.
type Spec struct {
	// Method is the HTTP method; empty means GET.
	Method string
	// URL is the absolute http(s) URL template.
	URL string
	// Headers are the header templates by name.
	Headers map[string]string
	// Body is the body template; empty sends no body.
	Body string
}

// bodyKind says how placeholders of a body are escaped.
type bodyKind int

const (
	bodyPlain bodyKind = iota
	bodyJSON
	bodyForm
)

// Tool is a REST tool: one templated HTTP request per call. It is safe for concurrent use.
type Tool struct {
	method   string
	url      template
	headers  map[string]template
	body     template
	bodyKind bodyKind
	params   []string
	client   *http.Client
}

// New parses spec's templates and returns the tool, which sends its requests with client.
// An unknown method, a URL that is not absolute http(s) and malformed placeholders are errors.
func New(spec Spec, client *http.Client) (*Tool, error) {
	if client == nil {
		return nil, errors.New("rest tool needs an HTTP client")
	}
	t := &Tool{method: strings.ToUpper(spec.Method), headers: make(map[string]template, len(spec.Headers))}
	t.client = confined(client, append(slices.Collect(maps.Keys(spec.Headers)), identityHeaders...))
	if t.method == "" {
		t.method = http.MethodGet
	}
	if !validMethod(t.method) {
		return nil, fmt.Errorf("method %q is not an HTTP method token", spec.Method)
	}
	var err error
	if t.url, err = parseTemplate(spec.URL); err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	if err := checkURL(t.url); err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	t.url.markQuery()
	for name, value := range spec.Headers {
		if !validHeaderName(name) {
			return nil, fmt.Errorf("header %q: not a valid header name", name)
		}
		if strings.EqualFold(name, UserHeader) {
			return nil, fmt.Errorf("header %q: the action stage sets it to the user the call acts for; a tool may not set it", name)
		}
		if strings.EqualFold(name, ApproverHeader) {
			return nil, fmt.Errorf("header %q: the action stage sets it to who approved the call; "+
				"a tool may not set it", name)
		}
		if t.headers[name], err = parseTemplate(value); err != nil {
			return nil, fmt.Errorf("header %s: %w", name, err)
		}
	}
	if t.body, err = parseTemplate(spec.Body); err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	t.bodyKind = kindOf(spec.Headers, spec.Body)
	if t.bodyKind == bodyJSON {
		t.body.markJSONStrings()
	}
	names := map[string]bool{}
	t.url.params(names)
	for _, h := range t.headers {
		h.params(names)
	}
	t.body.params(names)
	t.params = slices.Sorted(maps.Keys(names))
	return t, nil
}

// maxRedirects is how many redirects a call follows, as Go's client does by default.
const maxRedirects = 10

// confined returns a copy of client that, following a redirect to another origin (scheme, host
// and port; the host upgraded from http to https is not another) than the request's, leaves
// out the headers the tool's configuration sets but Content-Type, UserHeader and ApproverHeader:
// they may hold the credentials of the tool's server (an API key), who its user is and who
// approved the call, and a path or query the model fills may reach a redirect to anywhere (an
// open redirect of the API). Go's client leaves out only Authorization and cookies.
func confined(client *http.Client, headers []string) *http.Client {
	c := *client
	next := client.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !origin.Same(req.URL, via[0].URL) {
			for _, name := range headers {
				if !strings.EqualFold(name, "Content-Type") {
					req.Header.Del(name)
				}
			}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return nil
	}
	return &c
}

// Writes reports whether the tool's method may change what its server holds: any but GET,
// HEAD and OPTIONS, the methods HTTP defines as safe (RFC 9110 §9.2.1).
func (t *Tool) Writes() bool {
	switch t.method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// validMethod reports whether m is an HTTP method token.
func validMethod(m string) bool {
	return m != "" && !strings.ContainsFunc(m, func(r rune) bool { return r < 'A' || r > 'Z' })
}

// validHeaderName reports whether name is an HTTP header field name.
func validHeaderName(name string) bool {
	return name != "" && !strings.ContainsFunc(name, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
	})
}

// checkURL checks that the URL template, with every placeholder filled, is an absolute
// http(s) URL whose scheme and host do not come from placeholders, so that arguments cannot
// send the request elsewhere.
func checkURL(t template) error {
	var hosts []string
	for _, fill := range []string{"1", "2"} {
		sample, _ := t.render(func(segment) (string, error) { return fill, nil })
		u, err := url.Parse(sample)
		if err != nil {
			return err
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%q is not an absolute http(s) URL", sample)
		}
		hosts = append(hosts, u.Scheme+"://"+u.Host)
	}
	if hosts[0] != hosts[1] {
		return errors.New("the scheme and host must be fixed, not filled from parameters")
	}
	return nil
}

// kindOf returns how the body's placeholders are escaped: by the Content-Type header, else
// JSON when the template looks like JSON.
func kindOf(headers map[string]string, body string) bodyKind {
	for name, value := range headers {
		if !strings.EqualFold(name, "Content-Type") {
			continue
		}
		media, _, err := mime.ParseMediaType(value)
		switch {
		case err != nil:
			return bodyPlain
		case media == "application/x-www-form-urlencoded":
			return bodyForm
		case media == "application/json" || strings.HasSuffix(media, "+json"):
			return bodyJSON
		default:
			return bodyPlain
		}
	}
	if trimmed := strings.TrimSpace(body); strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "[") {
		return bodyJSON
	}
	return bodyPlain
}

// Parameters returns the names of the tool's placeholders, sorted.
func (t *Tool) Parameters() []string {
	return slices.Clone(t.params)
}

// DefaultSchema returns the argument schema of a tool that declares none: an object whose
// properties are the placeholder names, each a required string.
func DefaultSchema(params []string) map[string]any {
	props := make(map[string]any, len(params))
	required := make([]any, len(params))
	for i, p := range params {
		props[p] = map[string]any{"type": "string"}
		required[i] = p
	}
	schema := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		schema["required"] = required
	}
	return schema
}

// Call sends the request with the placeholders filled from args and returns the response body.
// Who the call acts for and who approved it are sent in UserHeader and ApproverHeader, each
// only when known.
func (t *Tool) Call(ctx context.Context, args map[string]any, who Principals) (string, error) {
	req, err := t.request(ctx, args, who)
	if err != nil {
		return "", err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		// The URL may carry secrets (an API key in the query): say the method, not the URL.
		if uerr := (*url.Error)(nil); errors.As(err, &uerr) {
			err = fmt.Errorf("%s request failed: %w", req.Method, uerr.Err)
		}
		if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
			return "", unsent{err}
		}
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return "", fmt.Errorf("reading the response: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		wait, _ := retryafter.Parse(resp.Header, time.Now())
		return "", &StatusError{Code: resp.StatusCode, Status: resp.Status, Body: excerpt(body),
			RetryAfter: wait}
	}
	if len(body) > MaxResponseBytes {
		return "", fmt.Errorf("response body is larger than %d bytes", MaxResponseBytes)
	}
	return string(body), nil
}

// request builds the HTTP request of one call, for who.
func (t *Tool) request(ctx context.Context, args map[string]any, who Principals) (*http.Request, error) {
	pathValues := map[string]string{}
	rawURL, err := t.url.render(func(s segment) (string, error) {
		v, err := text(args[s.param])
		if err == nil && !s.inQuery && dotSegment(v) {
			err = fmt.Errorf("parameter %q is %q, which in the URL's path would name another path than the tool's (a relative segment)", s.param, v)
		}
		if !s.inQuery {
			pathValues[s.param] = v
		}
		return escapeURL(v), err
	})
	if err != nil {
		return nil, err
	}
	if param := t.url.emptySegment(pathValues); param != "" {
		return nil, fmt.Errorf("parameter %q is empty, which in the URL's path would leave an empty segment and name another path than the tool's", param)
	}
	var body io.Reader
	if len(t.body) > 0 {
		b, err := t.body.render(func(s segment) (string, error) { return t.bodyValue(s, args[s.param]) })
		if err != nil {
			return nil, err
		}
		body = strings.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, t.method, rawURL, body)
	if err != nil {
		return nil, err
	}
	for name, h := range t.headers {
		v, err := h.render(func(s segment) (string, error) { return headerValue(s.param, args[s.param]) })
		if err != nil {
			return nil, err
		}
		req.Header.Set(name, v)
	}
	if who.User != "" {
		req.Header.Set(UserHeader, who.User)
	}
	if who.Approver != "" {
		req.Header.Set(ApproverHeader, who.Approver)
	}
	if t.bodyKind == bodyJSON && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// bodyValue returns the body text of placeholder s with value v.
func (t *Tool) bodyValue(s segment, v any) (string, error) {
	switch {
	case t.bodyKind == bodyJSON && s.inString:
		txt, err := text(v)
		if err != nil {
			return "", err
		}
		return escapeJSONString(txt)
	case t.bodyKind == bodyJSON:
		b, err := marshal(v)
		return string(b), err
	case t.bodyKind == bodyForm:
		txt, err := text(v)
		return url.QueryEscape(txt), err
	default:
		return text(v)
	}
}

// excerpt returns the start of a response body for an error message.
func excerpt(body []byte) string {
	s := strings.TrimSpace(string(body))
	if len(s) <= excerptBytes {
		return s
	}
	return s[:textcut.Boundary(s, excerptBytes)] + "…"
}

// StatusError is a response whose status is not 2xx.
type StatusError struct {
	// Code is the status code, e.g. 404.
	Code int
	// Status is the status line, e.g. "404 Not Found".
	Status string
	// Body is the start of the response body.
	Body string
	// RetryAfter is how long the server asked to wait before the request is sent again (its
	// retry-after-ms header, else its Retry-After, in seconds, fractions accepted, or as a
	// date: retryafter.Parse, as the generation stage reads its providers'), at most
	// MaxRetryAfter; 0 when it did not say.
	RetryAfter time.Duration
}

// MaxRetryAfter is the longest wait a StatusError's RetryAfter says: a longer one (however many
// digits its seconds have) is taken as this.
const MaxRetryAfter = retryafter.Max

// Error says the status and quotes the body's start.
func (e *StatusError) Error() string {
	if e.Body == "" {
		return "HTTP " + e.Status
	}
	return "HTTP " + e.Status + ": " + e.Body
}

// Unwrap returns ErrTransient for 429 and 503, and ErrTransient and ErrMayHaveRun for 502
// and 504.
func (e *StatusError) Unwrap() []error {
	switch e.Code {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return []error{ErrTransient}
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return []error{ErrTransient, ErrMayHaveRun}
	}
	return nil
}

// unsent marks a failure before the request was sent, worth retrying, without changing its
// message.
type unsent struct{ error }

// Unwrap returns ErrTransient, ErrNotSent and the failure.
func (e unsent) Unwrap() []error { return []error{ErrTransient, ErrNotSent, e.error} }
