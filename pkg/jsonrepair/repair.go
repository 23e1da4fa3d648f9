package jsonrepair

import (
	"fmt"
	"strings"
)

// fence is the Markdown code fence.
const fence = "```"

// Repair applies the guarded textual fixes to text and returns the result with one line per
// kind of fix applied, in this order: code fence, leading prose, then what the scan fixed
// (trailing prose, stray and mismatched closers, comments, trailing commas, quoting, literals,
// control characters, a dangling string or key, missing closers). No lines means nothing was
// changed. Repair does not check that the result parses.
func Repair(text string) (string, []string) {
	var steps []string
	t := strings.TrimSpace(text)
	if inner, ok := stripFence(t); ok {
		t = inner
		steps = append(steps, "stripped a ``` code fence")
	}
	if i := valueStart(t); i > 0 {
		steps = append(steps, fmt.Sprintf("dropped %d bytes of text before the JSON value", i))
		t = t[i:]
	}
	s := scanner{text: t}
	s.run()
	return string(s.out), append(steps, s.steps()...)
}

// stripFence returns the content of the first ``` code fence when the fence opens before any
// JSON does: the language tag after the opening fence is dropped, and the content ends at the
// next fence that starts a line (or ends the text).
func stripFence(t string) (string, bool) {
	open := strings.Index(t, fence)
	if open < 0 || strings.ContainsAny(t[:open], "{[") {
		return t, false
	}
	rest := t[open+len(fence):]
	if nl := strings.IndexByte(rest, '\n'); nl >= 0 && !strings.ContainsAny(rest[:nl], "{[\"") {
		rest = rest[nl+1:]
	} else {
		rest = strings.TrimLeft(rest, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
	}
	switch end := strings.Index(rest, "\n"+fence); {
	case end >= 0:
		rest = rest[:end]
	case strings.HasSuffix(strings.TrimSpace(rest), fence):
		rest = strings.TrimSuffix(strings.TrimSpace(rest), fence)
	}
	return strings.TrimSpace(rest), true
}

// valueStart is where the JSON value begins: the first "{", or an earlier "[" that is
// followed by something a JSON array can hold (so "see [docs]: {...}" starts at the brace);
// 0 when there is neither.
func valueStart(t string) int {
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case '{':
			return i
		case '[':
			if next := strings.TrimLeft(t[i+1:], " \t\r\n"); next == "" || strings.IndexByte(arrayStarts, next[0]) >= 0 {
				return i
			}
		}
	}
	return 0
}

// arrayStarts are the bytes that may follow "[" in a JSON (or repairable) array.
const arrayStarts = "{[]\"'-0123456789tfnTFN"
