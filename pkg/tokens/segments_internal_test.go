package tokens

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/textcut"
)

// referenceSegments cuts text as segments did before it searched each window only for what
// the last did not: every window searched whole.
func referenceSegments(text string) []string {
	var out []string
	for len(text) > segmentBytes {
		cut := wordBoundary(text[:segmentBytes+1], 0)
		if cut <= 0 {
			if cut = textcut.Boundary(text, hardCutBytes); cut == 0 {
				cut = hardCutBytes
			}
		}
		out = append(out, text[:cut])
		text = text[cut:]
	}
	if text != "" {
		out = append(out, text)
	}
	return out
}

// TestSegmentsCutAsBefore: texts with word boundaries far apart, near the windows' edges or
// none, in any script and not UTF-8, are cut where every window searched whole cut them.
func TestSegmentsCutAsBefore(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	var texts []string
	units := []string{"日本語", "x", "ab", " ", "  ", "\n", " a", "é", "\xff", "\x80", "😀"}
	for range 300 {
		var b strings.Builder
		size := r.IntN(12000)
		for b.Len() < size {
			unit := units[r.IntN(len(units))]
			if unit[0] == ' ' && r.IntN(40) > 0 {
				unit = "語" // spaces rare, so that most windows have none
			}
			b.WriteString(unit)
		}
		texts = append(texts, b.String())
	}
	// A word boundary at every place around where the first windows end, in text cut at
	// character boundaries (CJK) or anywhere (not UTF-8).
	for _, run := range []string{strings.Repeat("語", 1500), strings.Repeat("\x80", 4500)} {
		for i := 1800; i < 2800; i++ {
			texts = append(texts, run[:i]+" a"+run)
		}
	}
	for _, text := range texts {
		if got, want := slices.Collect(segments(text)), referenceSegments(text); !slices.Equal(got, want) {
			t.Fatalf("%q cut into %d segments, every window searched whole %d", text, len(got), len(want))
		}
	}
}
