package main

import (
	"fmt"
	"strings"
)

// printable is s as text a terminal shows rather than obeys: what a model, a tool or a person
// wrote reaches the progress and the answer, and an escape sequence in it could clear the
// screen, set the window's title, move the cursor to overwrite what was shown, or, in some
// terminals, write to the clipboard. Each control character but a line feed and a tab is shown
// instead: a C0 control in caret notation (ESC as ^[, a carriage return not ending a line as
// ^M; a CRLF line end is a line feed), DEL as ^?, a C1 control as \u0080 … \u009f. s without
// any is returned as it is.
func printable(s string) string {
	if strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		switch {
		case !isControl(r):
			b.WriteRune(r)
		case r < 0x20:
			b.WriteByte('^')
			b.WriteByte(byte(r) + '@')
		case r == 0x7f:
			b.WriteString("^?")
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// isControl reports whether a terminal takes r for a control rather than text to show: a C0
// control other than a line feed or a tab, DEL, or a C1 control.
func isControl(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f)
}
