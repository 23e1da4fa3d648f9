// Package textcut cuts text where the cut splits no UTF-8 sequence. Text cut in the middle of
// a character is no longer UTF-8, which every protobuf string field must be: a message holding
// it does not encode, and its receiver would reject it.
package textcut

import "unicode/utf8"

// Boundary returns the largest cut <= n at which s can be cut without splitting a UTF-8
// sequence, len(s) when n is past its end. It steps back over continuation bytes: at most three
// in valid UTF-8. It returns 0 when every byte from the start to n continues a sequence
// (s is not UTF-8 there); a caller that must make progress cuts at n instead.
func Boundary(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return max(n, 0)
}

// Tail returns the longest end of s of at most n bytes that splits no UTF-8 sequence: the cut
// steps forward over continuation bytes, so it may keep up to three bytes fewer than n. It
// returns s when n is past its length, "" when n is 0 or less.
func Tail(s string, n int) string {
	start := len(s) - max(n, 0)
	if start <= 0 {
		return s
	}
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return s[start:]
}

// Middle returns s when it has at most n bytes, else its start and its end joined by mark, at
// most n bytes in all, cut where no UTF-8 sequence is split: the beginning and the end of a
// text say most of what it is about (a message), or what it is (a schema failure's property
// and rule).
func Middle(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	half := max(n-len(mark), 0) / 2
	return s[:Boundary(s, half)] + mark + Tail(s, half)
}
