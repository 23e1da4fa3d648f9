package rest

import (
	"fmt"
	"strings"
)

// Placeholder syntax.
const (
	placeholderOpen  = "${parameters."
	placeholderClose = "}"
)

// segment is literal text or one placeholder of a template.
type segment struct {
	// text is the literal text; empty for a placeholder.
	text string
	// param names the placeholder's parameter; empty for literal text.
	param string
	// inString is true for a placeholder inside a JSON string literal of the template.
	inString bool
	// inQuery is true for a placeholder of a URL after its path: in its query or fragment.
	inQuery bool
}

// template is a parsed text with ${parameters.NAME} placeholders.
type template []segment

// parseTemplate splits s into literal text and placeholders. A placeholder that is not
// closed or whose name is not made of letters, digits, '_' and '-' is an error.
func parseTemplate(s string) (template, error) {
	var t template
	for len(s) > 0 {
		start := strings.Index(s, placeholderOpen)
		if start < 0 {
			t = append(t, segment{text: s})
			break
		}
		if start > 0 {
			t = append(t, segment{text: s[:start]})
		}
		rest := s[start+len(placeholderOpen):]
		end := strings.Index(rest, placeholderClose)
		if end < 0 {
			return nil, fmt.Errorf("unterminated placeholder %q", s[start:])
		}
		name := rest[:end]
		if !validParam(name) {
			return nil, fmt.Errorf("invalid placeholder %q: parameter names use letters, digits, '_' and '-'", s[start:start+len(placeholderOpen)+end+1])
		}
		t = append(t, segment{param: name})
		s = rest[end+len(placeholderClose):]
	}
	return t, nil
}

// validParam reports whether name is a non-empty run of letters, digits, '_' and '-'.
func validParam(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// markJSONStrings sets inString on the placeholders that stand inside a JSON string literal,
// reading the literal text as JSON: a '"' not escaped by a backslash opens or closes a string.
func (t template) markJSONStrings() {
	inString, escaped := false, false
	for i := range t {
		if t[i].param != "" {
			t[i].inString = inString
			escaped = false
			continue
		}
		for _, c := range []byte(t[i].text) {
			switch {
			case escaped:
				escaped = false
			case inString && c == '\\':
				escaped = true
			case c == '"':
				inString = !inString
			}
		}
	}
}

// params appends the template's parameter names to names.
func (t template) params(names map[string]bool) {
	for _, s := range t {
		if s.param != "" {
			names[s.param] = true
		}
	}
}

// markQuery sets inQuery on the placeholders of a URL template that follow the first '?' or
// '#' of its literal text.
func (t template) markQuery() {
	query := false
	for i, s := range t {
		if s.param == "" {
			query = query || strings.ContainsAny(s.text, "?#")
			continue
		}
		t[i].inQuery = query
	}
}

// emptySegment returns the first placeholder of a URL template's path whose segment (the text
// between two slashes, or after the last one) the values of the path's placeholders leave
// empty, "" when there is none: "/users/${parameters.id}/posts" with an empty id is
// "/users//posts", which servers and proxies merge into "/users/posts", and
// "/users/${parameters.id}" is "/users/", the collection, both other paths than the tool's.
func (t template) emptySegment(values map[string]string) string {
	var first string                        // the first placeholder of the current segment
	filled := false                         // the current segment has text
	closeSegment := func() (param string) { // the segment's first placeholder if it is empty
		if !filled {
			param = first
		}
		first, filled = "", false
		return param
	}
	for _, s := range t {
		if s.param != "" { // in the path: the literal '?' or '#' before a query's ends the loop
			if first == "" {
				first = s.param
			}
			filled = filled || values[s.param] != ""
			continue
		}
		for _, c := range s.text {
			switch c {
			case '?', '#':
				return closeSegment()
			case '/':
				if p := closeSegment(); p != "" {
					return p
				}
			default:
				filled = true
			}
		}
	}
	return closeSegment()
}

// render fills the template, turning each placeholder into text with fill.
func (t template) render(fill func(s segment) (string, error)) (string, error) {
	var b strings.Builder
	for _, s := range t {
		if s.param == "" {
			b.WriteString(s.text)
			continue
		}
		v, err := fill(s)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
	}
	return b.String(), nil
}
