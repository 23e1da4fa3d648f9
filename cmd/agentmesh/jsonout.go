package main

import (
	"fmt"
	"unicode/utf8"
)

// jsonPrintable is b, JSON the CLI prints, with DEL and the C1 controls (U+0080 to U+009F)
// escaped as \u007f and \u0080 … \u009f: encoding/json and protojson escape C0 controls only,
// and the C1 ones, as valid UTF-8 as any text, reached the terminal raw, to be obeyed (CSI,
// U+009B, begins the same sequences as ESC [). They are the controls of isControl that JSON
// holds raw (its line feeds and tabs are none of them), and only inside strings, so the
// escaped JSON decodes to the same values. b without any is returned as it is.
func jsonPrintable(b []byte) []byte {
	i := 0
	for i < len(b) && b[i] < utf8.RuneSelf && b[i] != 0x7f {
		i++
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, i, len(b)+16)
	copy(out, b[:i])
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		if isControl(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}
