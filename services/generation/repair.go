package generation

import (
	"fmt"
	"strings"
)

// repairJSON applies guarded fixes to tool-call arguments that failed to parse as JSON: it
// strips a Markdown code fence, drops text before the first "{", drops text after the first
// complete object, removes trailing commas, and closes an unterminated string and unbalanced
// braces and brackets. It returns the repaired text and one line per fix applied; no lines
// means nothing could be fixed.
func repairJSON(text string) (string, []string) {
	var steps []string
	t := strings.TrimSpace(text)
	if inner, ok := stripFence(t); ok {
		t = inner
		steps = append(steps, "stripped a ``` code fence")
	}
	if i := strings.IndexByte(t, '{'); i > 0 {
		steps = append(steps, fmt.Sprintf("dropped %d bytes of text before the JSON object", i))
		t = t[i:]
	}
	b := balancer{}
	b.run(t)
	return b.out.String(), append(steps, b.steps()...)
}

// stripFence removes a ``` fence (with an optional language tag) around text.
func stripFence(t string) (string, bool) {
	rest, ok := strings.CutPrefix(t, "```")
	if !ok {
		return t, false
	}
	if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
		rest = rest[nl+1:]
	} else {
		rest = strings.TrimLeft(rest, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
	}
	if end := strings.LastIndex(rest, "```"); end >= 0 {
		rest = rest[:end]
	}
	return strings.TrimSpace(rest), true
}

// balancer copies JSON text while tracking strings and nesting, fixing what it can.
type balancer struct {
	out            strings.Builder
	stack          []byte
	inString       bool
	escaped        bool
	trailing       int
	commas         int
	stray          int
	closedString   bool
	addedClosers   string
	mismatchClosed int
}

// closerOf maps an opener to its closer.
var closerOf = map[byte]byte{'{': '}', '[': ']'}

// run copies t into out, stopping after the first complete top-level value.
func (b *balancer) run(t string) {
	started := false
	for i := 0; i < len(t); i++ {
		c := t[i]
		if started && len(b.stack) == 0 {
			if rest := strings.TrimSpace(t[i:]); rest != "" {
				b.trailing = len(rest)
			}
			return
		}
		switch {
		case b.inString:
			b.out.WriteByte(c)
			switch {
			case b.escaped:
				b.escaped = false
			case c == '\\':
				b.escaped = true
			case c == '"':
				b.inString = false
			}
		case c == '"':
			b.inString = true
			b.out.WriteByte(c)
		case c == '{' || c == '[':
			started = true
			b.stack = append(b.stack, c)
			b.out.WriteByte(c)
		case c == '}' || c == ']':
			b.close(c)
		default:
			b.out.WriteByte(c)
		}
	}
	b.finish()
}

// close handles a closer: it removes a trailing comma before it, closes any inner openers it
// skips, and drops it when nothing it could close is open.
func (b *balancer) close(c byte) {
	match := -1
	for j := len(b.stack) - 1; j >= 0; j-- {
		if closerOf[b.stack[j]] == c {
			match = j
			break
		}
	}
	if match < 0 {
		b.stray++
		return
	}
	b.dropTrailingComma()
	for len(b.stack)-1 > match {
		b.out.WriteByte(closerOf[b.pop()])
		b.mismatchClosed++
	}
	b.pop()
	b.out.WriteByte(c)
}

// finish closes what the text left open.
func (b *balancer) finish() {
	if b.inString {
		if b.escaped {
			s := b.out.String()
			b.out.Reset()
			b.out.WriteString(s[:len(s)-1])
		}
		b.out.WriteByte('"')
		b.inString = false
		b.closedString = true
	}
	if len(b.stack) == 0 {
		return
	}
	s := strings.TrimRight(b.out.String(), " \t\r\n")
	b.out.Reset()
	b.out.WriteString(s)
	if strings.HasSuffix(s, ":") {
		b.out.WriteString("null")
	}
	b.dropTrailingComma()
	var closers strings.Builder
	for len(b.stack) > 0 {
		closers.WriteByte(closerOf[b.pop()])
	}
	b.addedClosers = closers.String()
	b.out.WriteString(b.addedClosers)
}

// dropTrailingComma removes a comma that ends the output, ignoring whitespace after it.
func (b *balancer) dropTrailingComma() {
	s := b.out.String()
	trimmed := strings.TrimRight(s, " \t\r\n")
	if strings.HasSuffix(trimmed, ",") {
		b.out.Reset()
		b.out.WriteString(trimmed[:len(trimmed)-1])
		b.commas++
	}
}

func (b *balancer) pop() byte {
	c := b.stack[len(b.stack)-1]
	b.stack = b.stack[:len(b.stack)-1]
	return c
}

// steps describes the fixes the balancer applied.
func (b *balancer) steps() []string {
	var steps []string
	if b.trailing > 0 {
		steps = append(steps, fmt.Sprintf("trimmed %d bytes of trailing text after the JSON object", b.trailing))
	}
	if b.stray > 0 {
		steps = append(steps, fmt.Sprintf("dropped %d unmatched closing brackets", b.stray))
	}
	if b.mismatchClosed > 0 {
		steps = append(steps, fmt.Sprintf("closed %d brackets left open inside another", b.mismatchClosed))
	}
	if b.commas > 0 {
		steps = append(steps, fmt.Sprintf("removed %d trailing commas", b.commas))
	}
	if b.closedString {
		steps = append(steps, "closed an unterminated string")
	}
	if b.addedClosers != "" {
		steps = append(steps, fmt.Sprintf("appended the missing closers %q", b.addedClosers))
	}
	return steps
}
