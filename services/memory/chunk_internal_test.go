package memory

import (
	"slices"
	"strings"
	"testing"
)

func TestChunkText(t *testing.T) {
	table := []struct {
		name string
		text string
		max  int
		want []string
	}{
		{"blank text has no chunks", " \n\n\t\n", 10, nil},
		{"short text is one chunk", "hello\nworld\n", 100, []string{"hello\nworld"}},
		{"paragraphs are packed while they fit", "aaa\n\nbbb\n\nccc", 8, []string{"aaa\n\nbbb", "ccc"}},
		{"a paragraph is never split when it fits", "aaaa\n\nbbbbbbbb", 8, []string{"aaaa", "bbbbbbbb"}},
		{"blank lines with spaces and CRLF separate paragraphs", "one\r\n \r\ntwo\r\nthree", 9, []string{"one", "two\nthree"}},
		{"a long paragraph splits at line ends", "l1 aaa\nl2 bbb\nl3 ccc", 14, []string{"l1 aaa\nl2 bbb", "l3 ccc"}},
		{"a long line splits at spaces", "aaa bbb ccc ddd", 8, []string{"aaa bbb", "ccc ddd"}},
		{"a long word splits between characters", "abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
		{"multi-byte characters are never cut", "ééééé", 3, []string{"é", "é", "é", "é", "é"}},
		{"indentation inside a paragraph is kept", "code:\n    x := 1\n    y := 2", 100, []string{"code:\n    x := 1\n    y := 2"}},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			got := chunkText(tc.text, tc.max)
			if !slices.Equal(got, tc.want) {
				t.Errorf("chunkText(%q, %d) = %q, want %q", tc.text, tc.max, got, tc.want)
			}
			for _, c := range got {
				if len(c) > tc.max {
					t.Errorf("chunk %q is %d bytes, over %d", c, len(c), tc.max)
				}
			}
		})
	}
}

// Chunks of a large document keep every word, in order, within the limit.
func TestChunkTextKeepsEveryWord(t *testing.T) {
	var b strings.Builder
	for i := range 300 {
		b.WriteString(strings.Repeat("word ", i%40))
		b.WriteString("end.\n")
		if i%7 == 0 {
			b.WriteString("\n")
		}
	}
	text := b.String()
	chunks := chunkText(text, 256)
	if len(chunks) < 10 {
		t.Fatalf("%d chunks", len(chunks))
	}
	for _, c := range chunks {
		if len(c) > 256 {
			t.Errorf("chunk of %d bytes", len(c))
		}
	}
	if got, want := strings.Fields(strings.Join(chunks, " ")), strings.Fields(text); !slices.Equal(got, want) {
		t.Errorf("chunks hold %d words, the text %d", len(got), len(want))
	}
}

func TestDocumentTitle(t *testing.T) {
	table := []struct {
		path, text, want string
	}{
		{"guide.md", "intro\n# Getting started\n## Next", "Getting started"},
		{"guide.markdown", "### Deep heading ###\n", "Deep heading"},
		{"lang.md", "# C#\n", "C#"},
		{"fence.md", "```bash\n# not a heading\n```\n## After the fence", "After the fence"},
		{"tilde.md", "~~~\n# no\n~~~\n# Yes", "Yes"},
		{"nospace.md", "#hashtag\n", "nospace.md"},
		{"seven.md", "####### too deep\n", "seven.md"},
		{"empty-heading.md", "#\n# Real", "Real"},
		{"notes.txt", "# A heading in a text file\n", "notes.txt"},
		{"docs/sub/README.MD", "   # Indented heading", "Indented heading"},
	}
	for _, tc := range table {
		if got := documentTitle(tc.path, tc.text); got != tc.want {
			t.Errorf("documentTitle(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}
