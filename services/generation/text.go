package generation

import (
	"strings"

	"github.com/agentmesh/agentmesh/pkg/textcut"
)

// truncate cuts text to at most limit bytes, at a word boundary when one is near, marking the
// cut with an ellipsis.
func truncate(text string, limit int) string {
	if len(text) <= limit {
		return text
	}
	cut := textcut.Boundary(text, limit)
	if i := strings.LastIndexAny(text[:cut], " \n\t"); i > limit*3/4 {
		cut = i
	}
	return strings.TrimRight(text[:cut], " \n\t") + "…"
}

// splitWords splits text after each run of spaces, so the pieces join back to text.
func splitWords(text string) []string {
	var out []string
	for text != "" {
		i := strings.IndexByte(text, ' ')
		if i < 0 {
			return append(out, text)
		}
		for i < len(text) && text[i] == ' ' {
			i++
		}
		out = append(out, text[:i])
		text = text[i:]
	}
	return out
}
