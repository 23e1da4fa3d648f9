package tokens

import (
	"encoding/binary"
	"unsafe"
)

// Estimate returns the estimated token count of text: a token per four bytes, rounded up, but
// a character of three bytes in UTF-8 (CJK, Indic scripts) counts as a token and one of four
// (an emoji) as two, which tokenizers split far more finely than English; at least 1 for
// non-empty text and 0 for the empty string. ASCII text costs what it always did, read 32
// bytes at a time.
func Estimate(text string) int64 {
	n := int64(len(text))
	return (n + wideExtra(text) + BytesPerToken - 1) / BytesPerToken
}

// asciiMask has the high bit of each of eight bytes: words of ASCII have none of them.
const asciiMask = 0x8080808080808080

// wideExtra returns what the characters of three and four bytes add to their bytes, in
// fourths of a token: one for a three-byte character (the lead byte 0xE0 to 0xEF), which then
// costs four, and four for a four-byte character (the lead byte 0xF0 to 0xF7), which costs
// eight. Bytes that are not UTF-8 count as they are read.
func wideExtra(text string) int64 {
	var extra int64
	b := unsafe.Slice(unsafe.StringData(text), len(text)) // read, never written
	i := 0
	for ; i+32 <= len(b); i += 32 {
		w := binary.LittleEndian.Uint64(b[i:]) | binary.LittleEndian.Uint64(b[i+8:]) |
			binary.LittleEndian.Uint64(b[i+16:]) | binary.LittleEndian.Uint64(b[i+24:])
		if w&asciiMask == 0 {
			continue
		}
		for _, c := range b[i : i+32] {
			extra += int64(leadExtra[c])
		}
	}
	for _, c := range b[i:] {
		extra += int64(leadExtra[c])
	}
	return extra
}

// leadExtra is what each byte adds when it leads a character of three or four bytes.
var leadExtra = func() (t [256]uint8) {
	for b := 0xE0; b < 0x100; b++ {
		t[b] = 1
		if b >= 0xF0 {
			t[b] = 4
		}
	}
	return t
}()
