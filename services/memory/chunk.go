package memory

import (
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/pkg/textcut"
)

// blankLines separates paragraphs.
var blankLines = regexp.MustCompile(`\n[ \t]*\n`)

// chunkSeparators split a paragraph longer than a chunk: at line ends, then at spaces.
var chunkSeparators = []string{"\n", " "}

// chunkText splits text into chunks of at most maxBytes bytes at paragraph boundaries: whole
// paragraphs are packed into a chunk, joined by a blank line, while they fit. A paragraph
// longer than maxBytes is split at line ends, then at spaces, and as a last resort between
// characters. Line endings are normalised to \n; chunks carry no leading or trailing blank
// lines, and blank text has no chunks.
func chunkText(text string, maxBytes int) []string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	var paragraphs []string
	for _, p := range blankLines.Split(text, -1) {
		if p = strings.TrimRight(strings.Trim(p, "\n"), " \t\n"); strings.TrimSpace(p) != "" {
			paragraphs = append(paragraphs, p)
		}
	}
	return pack(paragraphs, "\n\n", maxBytes, 0)
}

// pack joins parts with sep into chunks of at most maxBytes, splitting a part that is too
// long on its own with chunkSeparators[level:].
func pack(parts []string, sep string, maxBytes, level int) []string {
	var chunks []string
	var cur strings.Builder
	flush := func() {
		if strings.TrimSpace(cur.String()) != "" {
			chunks = append(chunks, cur.String())
		}
		cur.Reset()
	}
	for _, part := range parts {
		if len(part) > maxBytes {
			flush()
			chunks = append(chunks, splitLong(part, maxBytes, level)...)
			continue
		}
		if cur.Len() > 0 && cur.Len()+len(sep)+len(part) > maxBytes {
			flush()
		}
		if cur.Len() > 0 {
			cur.WriteString(sep)
		}
		cur.WriteString(part)
	}
	flush()
	return chunks
}

// splitLong splits s, longer than maxBytes, at the first of chunkSeparators[level:] it holds,
// or between characters when it holds none.
func splitLong(s string, maxBytes, level int) []string {
	for ; level < len(chunkSeparators); level++ {
		if sep := chunkSeparators[level]; strings.Contains(s, sep) {
			return pack(strings.Split(s, sep), sep, maxBytes, level+1)
		}
	}
	var chunks []string
	for len(s) > maxBytes {
		cut := textcut.Boundary(s, maxBytes)
		if cut == 0 { // maxBytes is smaller than one character
			_, cut = utf8.DecodeRuneInString(s)
		}
		chunks = append(chunks, s[:cut])
		s = s[cut:]
	}
	return append(chunks, s)
}

// documentTitle is the text of the first Markdown heading (# to ######, outside fenced
// code blocks) of a Markdown document, else the file's name.
func documentTitle(path, text string) string {
	if ext := strings.ToLower(filepath.Ext(path)); ext == ".md" || ext == ".markdown" {
		fence := ""
		for line := range strings.Lines(text) {
			trimmed := strings.TrimSpace(line)
			if fence != "" {
				if strings.HasPrefix(trimmed, fence) {
					fence = ""
				}
				continue
			}
			if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
				fence = trimmed[:3]
				continue
			}
			if title, ok := atxHeading(trimmed); ok {
				return title
			}
		}
	}
	return filepath.Base(path)
}

// atxHeading returns the text of an ATX heading line ("## Title ##").
func atxHeading(line string) (string, bool) {
	level := len(line) - len(strings.TrimLeft(line, "#"))
	if level < 1 || level > 6 {
		return "", false
	}
	rest := line[level:]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", false
	}
	title := strings.TrimSpace(rest)
	// A closing run of #s is dropped when a space precedes it ("C#" keeps its #).
	if closed := strings.TrimRight(title, "#"); closed == "" || strings.HasSuffix(closed, " ") || strings.HasSuffix(closed, "\t") {
		title = strings.TrimSpace(closed)
	}
	return title, title != ""
}
