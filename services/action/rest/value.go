package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// text returns the text of an argument value: a string as is, a number in its shortest
// decimal form, true or false, compact JSON for objects and arrays, "" for nil.
func text(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case bool:
		return strconv.FormatBool(v), nil
	default:
		b, err := marshal(v)
		return string(b), err
	}
}

// marshal encodes v as compact JSON without HTML escaping.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// escapeURL percent-encodes every byte of s except the RFC 3986 unreserved characters, so
// that s stays one path segment or one query value.
func escapeURL(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

// dotSegment reports whether v, or a part of it between slashes, is "." or "..": a relative
// path segment, which clients, proxies and servers resolve against the path before it, so that
// a value in a URL's path would leave the tool's path ("../admin"). Percent-encoding does not
// prevent it: servers such as Go's ServeMux decode the path (%2E, %2F) before they resolve it.
func dotSegment(v string) bool {
	for _, part := range strings.FieldsFunc(v, func(r rune) bool { return r == '/' || r == '\\' }) {
		if part == "." || part == ".." {
			return true
		}
	}
	return false
}

// escapeJSONString returns s escaped for the inside of a JSON string literal.
func escapeJSONString(s string) (string, error) {
	b, err := marshal(s)
	if err != nil {
		return "", err
	}
	return string(b[1 : len(b)-1]), nil
}

// headerValue returns the text of v for a header; line breaks are refused.
func headerValue(param string, v any) (string, error) {
	s, err := text(v)
	if err != nil {
		return "", err
	}
	if strings.ContainsAny(s, "\r\n") {
		return "", fmt.Errorf("parameter %q contains a line break, which a header value cannot hold", param)
	}
	return s, nil
}
