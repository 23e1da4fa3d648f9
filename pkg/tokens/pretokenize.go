package tokens

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Classes of characters, as the patterns name them.
const (
	classLetter  = 1 << iota // \p{L}
	classNumber              // \p{N}
	classSpace               // \s (unicode.IsSpace)
	classNewline             // [\r\n]
	classUpper               // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], o200k_base's cased start of a word
	classLower               // [\p{Ll}\p{Lm}\p{Lo}\p{M}], o200k_base's rest of a word
)

// asciiClasses are the classes of the ASCII characters.
var asciiClasses = func() (t [utf8.RuneSelf]uint8) {
	for r := range rune(utf8.RuneSelf) {
		t[r] = unicodeClass(r)
	}
	return t
}()

// unicodeClass returns the classes of r.
func unicodeClass(r rune) uint8 {
	switch {
	case unicode.Is(unicode.Ll, r):
		return classLetter | classLower
	case unicode.Is(unicode.Lu, r) || unicode.Is(unicode.Lt, r):
		return classLetter | classUpper
	case unicode.IsLetter(r): // Lm, Lo
		return classLetter | classUpper | classLower
	case unicode.IsMark(r):
		return classUpper | classLower
	case unicode.IsNumber(r):
		return classNumber
	case r == '\r' || r == '\n':
		return classSpace | classNewline
	case unicode.IsSpace(r):
		return classSpace
	}
	return 0
}

// bmpClasses are the classes of the characters of the Basic Multilingual Plane (U+0000 to
// U+FFFF, which holds every script in common use but emoji), made on first use: 3 ms once, for
// 64 KiB, where unicodeClass's searches of Unicode's tables cost about 100 ns a character of
// CJK text, a third of the time of counting it (BenchmarkBPECount).
var bmpClasses = sync.OnceValue(func() *[1 << 16]uint8 {
	t := new([1 << 16]uint8)
	for r := range rune(len(t)) {
		t[r] = unicodeClass(r)
	}
	return t
})

// classAt returns the classes and the size of the character text[i:] starts with; 0 and 0
// at the end of text.
func classAt(text string, i int) (uint8, int) {
	if i >= len(text) {
		return 0, 0
	}
	if c := text[i]; c < utf8.RuneSelf {
		return asciiClasses[c], 1
	}
	r, n := utf8.DecodeRuneInString(text[i:])
	if r < 1<<16 {
		return bmpClasses()[r], n
	}
	return unicodeClass(r), n
}

// run returns the end of the characters from text[i:] on that are in one of the classes.
func run(text string, i int, classes uint8) int {
	for {
		c, n := classAt(text, i)
		if c&classes == 0 || n == 0 {
			return i
		}
		i += n
	}
}

// otherRun returns the end of the characters from text[i:] on that are none of \s, \p{L} and
// \p{N} ([^\s\p{L}\p{N}]).
func otherRun(text string, i int) int {
	for {
		c, n := classAt(text, i)
		if c&(classSpace|classLetter|classNumber) != 0 || n == 0 {
			return i
		}
		i += n
	}
}

// contraction returns the length of the contraction text starts with,
// (?i:'s|'t|'re|'ve|'m|'ll|'d), or 0. Case is ignored as regexp2 ignores it: a character
// matches a letter of the pattern when unicode.ToLower makes it that letter.
func contraction(text string) int {
	if !strings.HasPrefix(text, "'") {
		return 0
	}
	r1, n1 := utf8.DecodeRuneInString(text[1:])
	var second rune
	switch unicode.ToLower(r1) {
	case 's', 't', 'm', 'd':
		return 1 + n1
	case 'r', 'v':
		second = 'e'
	case 'l':
		second = 'l'
	default:
		return 0
	}
	if r2, n2 := utf8.DecodeRuneInString(text[1+n1:]); n2 > 0 && unicode.ToLower(r2) == second {
		return 1 + n1 + n2
	}
	return 0
}

// digits returns the end of \p{N}{1,3} at the start of text, whose first character is a
// number.
func digits(text string, first int) int {
	end := first
	for range 2 {
		c, n := classAt(text, end)
		if c&classNumber == 0 {
			break
		}
		end += n
	}
	return end
}

// spaces returns the length of the first piece of text, which starts with white space:
// \s*[\r\n]+ (the run of white space up to its last newline), else \s+(?!\S) (the run but
// for its last character, which starts the next piece, when something follows it), else \s+.
func spaces(text string) int {
	end, last, newline := 0, 0, -1
	for {
		c, n := classAt(text, end)
		if c&classSpace == 0 {
			break
		}
		if c&classNewline != 0 {
			newline = end + n
		}
		end, last = end+n, n
	}
	switch {
	case newline > 0:
		return newline
	case end == len(text) || end == last:
		return end
	}
	return end - last
}

// cl100kPiece returns the length of the first piece of text as cl100k_base's pattern cuts
// it:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//	\s*[\r\n]+|\s+(?!\S)|\s+
//
// The pre-tokenizers (cl100kPiece, o200kPiece) cut a text into the pieces whose bytes BPE
// merges, exactly as OpenAI's patterns for the encodings do (tiktoken and tiktoken-go have
// them as regular expressions, which TestPreTokenizersMatchThePatterns and FuzzPreTokenizers
// compare these with). They are written out by hand rather than run by a regular expression
// library: the patterns need a lookahead ((?!\S)), which Go's regexp does not have, and
// regexp2, which has it, backtracks over every piece and cut mixed text at 1-2 MB/s, most of
// the time a counter spent on a text it had not seen (BenchmarkPreTokenize). Each takes the
// alternatives of its pattern in order and, within one, the path the backtracking matcher
// takes first, and returns the length of the first piece of a non-empty, valid UTF-8 text.
func cl100kPiece(text string) int {
	if n := contraction(text); n > 0 {
		return n
	}
	c0, n0 := classAt(text, 0)
	c1, n1 := classAt(text, n0)
	switch {
	case c0&classLetter != 0:
		return run(text, n0, classLetter)
	case c0&(classNewline|classNumber) == 0 && c1&classLetter != 0:
		return run(text, n0+n1, classLetter)
	case c0&classNumber != 0:
		return digits(text, n0)
	case text[0] == ' ' && n1 > 0 && c1&(classSpace|classLetter|classNumber) == 0:
		return run(text, otherRun(text, n0), classNewline)
	case c0&classSpace == 0:
		return run(text, otherRun(text, 0), classNewline)
	}
	return spaces(text)
}

// o200kPiece returns the length of the first piece of text as o200k_base's pattern cuts it:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//	\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
func o200kPiece(text string) int {
	c0, n0 := classAt(text, 0)
	prefixed := c0&(classNewline|classLetter|classNumber) == 0
	for _, word := range [...]func(string, int) int{lowerWordEnd, upperWordEnd} {
		end := -1
		if prefixed {
			end = word(text, n0)
		}
		if end < 0 {
			end = word(text, 0)
		}
		if end > 0 {
			return end + contraction(text[end:])
		}
	}
	c1, n1 := classAt(text, n0)
	switch {
	case c0&classNumber != 0:
		return digits(text, n0)
	case text[0] == ' ' && n1 > 0 && c1&(classSpace|classLetter|classNumber) == 0:
		return slashRun(text, otherRun(text, n0))
	case c0&classSpace == 0:
		return slashRun(text, otherRun(text, 0))
	}
	return spaces(text)
}

// lowerWordEnd returns the end of [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
// from text[i:] on, or -1. The first part takes the longest run it can that the second still
// follows: the whole cased run when a lower-case run follows it, else the run up to its last
// character that is in both classes, which is then the second part.
func lowerWordEnd(text string, i int) int {
	both := -1 // the end of the last character of the run in both classes
	for {
		c, n := classAt(text, i)
		if c&classUpper == 0 {
			break
		}
		i += n
		if c&classLower != 0 {
			both = i
		}
	}
	if c, n := classAt(text, i); c&classLower != 0 {
		return run(text, i+n, classLower)
	}
	return both
}

// upperWordEnd returns the end of [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*
// from text[i:] on, or -1.
func upperWordEnd(text string, i int) int {
	end := run(text, i, classUpper)
	if end == i {
		return -1
	}
	return run(text, end, classLower)
}

// slashRun returns the end of [\r\n/]* from text[i:] on.
func slashRun(text string, i int) int {
	for i < len(text) && (text[i] == '\r' || text[i] == '\n' || text[i] == '/') {
		i++
	}
	return i
}

// validRunes returns text with every byte that is not part of a valid UTF-8 character
// replaced by U+FFFD, as regexp2 and tiktoken-go read it; text itself when it is valid.
func validRunes(text string) string {
	if utf8.ValidString(text) {
		return text
	}
	var b strings.Builder
	b.Grow(len(text) + 8)
	for _, r := range text {
		b.WriteRune(r)
	}
	return b.String()
}
