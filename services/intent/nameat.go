package intent

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// asciiSpace is what \s matches.
const asciiSpace = "\t\n\f\r "

// theLead matches the "the" a tool's name may follow its lead word with.
var theLead = regexp.MustCompile(`(?i)^the\s+`)

// nameAt is where a tool's name may start in a text after a lead word ("no", "with") and white
// space, with or without a "the": a tool's pattern, which needs one of the tool's forms there,
// is matched only where nameAt.names finds one, so that a long text with many lead words and
// many tools is not matched with every tool's pattern at every lead.
type nameAt struct {
	// at is where the lead word starts.
	at int
	// name is where the name starts without a "the".
	name int
	// afterThe is where it starts after a "the"; -1 when none follows the lead word.
	afterThe int
}

// newNameAt returns the nameAt of the lead word of text from at to end, which white space
// follows.
func newNameAt(text string, at, end int) nameAt {
	n := nameAt{at: at, afterThe: -1}
	n.name = len(text) - len(strings.TrimLeft(text[end:], asciiSpace))
	if the := theLead.FindStringIndex(text[n.name:]); the != nil {
		n.afterThe = n.name + the[1]
	}
	return n
}

// names reports whether one of the starts (leadForms) of a tool's forms may start where n
// says, in any case (as a pattern of (?i) matches it).
func (n nameAt) names(text string, starts []string) bool {
	return slices.ContainsFunc(starts, func(f string) bool {
		return hasFoldPrefix(text[n.name:], f) ||
			n.afterThe >= 0 && hasFoldPrefix(text[n.afterThe:], f)
	})
}

// leadForms returns the forms of a tool's name (toolForms) without the white space they start
// with, which may be part of a lead word's: what nameAt.names looks for.
func leadForms(forms []string) []string {
	out := make([]string, len(forms))
	for i, f := range forms {
		out[i] = strings.TrimLeft(f, asciiSpace)
	}
	return out
}

// hasFoldPrefix reports whether s starts with prefix under Unicode simple case folding, as a
// pattern of (?i) matches it.
func hasFoldPrefix(s, prefix string) bool {
	for _, p := range prefix {
		r, n := utf8.DecodeRuneInString(s)
		if n == 0 || !foldEqual(p, r) {
			return false
		}
		s = s[n:]
	}
	return true
}

// foldEqual reports whether a and b are the same rune under Unicode simple case folding.
func foldEqual(a, b rune) bool {
	if a == b {
		return true
	}
	if a < utf8.RuneSelf && b < utf8.RuneSelf {
		return 'A' <= a && a <= 'Z' && a+'a'-'A' == b || 'A' <= b && b <= 'Z' && b+'a'-'A' == a
	}
	for f := unicode.SimpleFold(a); f != a; f = unicode.SimpleFold(f) {
		if f == b {
			return true
		}
	}
	return false
}
