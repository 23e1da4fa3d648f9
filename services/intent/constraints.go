package intent

import (
	"cmp"
	"regexp"
	"slices"
	"strings"
)

// phrase is the rest of a clause: up to punctuation followed by a space, a line break or the
// end. Dots and commas inside a token ("main.go", "1,000") do not end it.
const phrase = `(?:[^,.;:!?\s]|[.,][^\s,.;:!?]|[^\S\n])+`

// constraintRule finds one kind of constraint phrase.
type constraintRule struct {
	pattern *regexp.Regexp
	// skip reports whether a match is not a constraint, given the words around it.
	skip func(prev, next string) bool
}

var (
	// constraintRules are the constraint phrases the intent stage extracts.
	constraintRules = []constraintRule{
		{pattern: regexp.MustCompile(`(?i)\b(?:in\s+(?:(?:under|at most|no more than|fewer than|less than|exactly|about)\s+)?|(?:under|at most|no more than|fewer than|less than)\s+)` +
			`\d+\s+(?:words?|sentences?|paragraphs?|lines?|bullet points?|bullets?|characters?)\b`)},
		{pattern: regexp.MustCompile(`(?i)\b(?:as|in)\s+(?:json|markdown|csv|yaml|html|plain text|a table|a list|a bulleted list|a numbered list|bullet points)(?:\s+format)?\b`)},
		{pattern: regexp.MustCompile(`(?i)\b(?:without|using|don[’']t|do not|never)\s` + phrase)},
		{pattern: regexp.MustCompile(`(?i)\bonly\s` + phrase), skip: func(prev, _ string) bool {
			return slices.Contains([]string{"the", "an", "not", "if", "my", "your", "his", "her", "our", "their", "its"}, prev)
		}},
		{pattern: regexp.MustCompile(`(?i)\bmust\s` + phrase), skip: func(_, next string) bool {
			return slices.Contains([]string{"i", "we", "you", "they", "he", "she", "it"}, next)
		}},
	}
	// clauseEnd ends a constraint phrase at a conjunction that starts a new clause.
	clauseEnd = regexp.MustCompile(`(?i)\s+(?:and then|then|but)\s`)
)

// span is one constraint phrase found in a goal.
type span struct{ start, end int }

// noTools rules out tools in general: "no tools", "no external tools", "no tool use".
var noTools = regexp.MustCompile(`(?i)\bno\s+(?:(?:external|other)\s+)?tools?(?:\s+use)?\b`)

// extractConstraints returns the constraint phrases of a goal in order of appearance; a phrase
// inside an earlier one is not repeated. Besides constraintRules, "no" and one of tools (a
// tool's name in any of its forms, toolForms) or tools in general is one ("no calculator",
// "no web search", "no tools"): "no" before anything else is too common to be one.
func extractConstraints(goal string, tools []string) []string {
	rules := constraintRules
	if lower := strings.ToLower(goal); strings.Contains(lower, "no ") {
		rules = append(slices.Clip(rules), constraintRule{pattern: noTools})
		for _, tool := range tools {
			if forms := toolForms(tool); strings.TrimSpace(tool) != "" && mentions([]string{lower}, forms) {
				rules = append(rules, constraintRule{pattern: regexp.MustCompile(`(?i)\bno\s+(?:the\s+)?` + namesPattern(forms) + `(?:\s+tools?)?\b`)})
			}
		}
	}
	var found []span
	for _, r := range rules {
		for _, loc := range r.pattern.FindAllStringIndex(goal, -1) {
			start, end := loc[0], loc[1]
			if cut := clauseEnd.FindStringIndex(goal[start:end]); cut != nil {
				end = start + cut[0]
			}
			end = start + len(strings.TrimRight(goal[start:end], " ,.;:!?"))
			if r.skip != nil && r.skip(lastWord(goal[:start]), secondWord(goal[start:end])) {
				continue
			}
			found = append(found, span{start, end})
		}
	}
	slices.SortFunc(found, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(b.end, a.end))
	})
	var out []string
	covered := 0
	for _, s := range found {
		if s.start < covered {
			continue
		}
		out = append(out, goal[s.start:s.end])
		covered = s.end
	}
	return out
}

// lastWord returns the last lower-case word of s.
func lastWord(s string) string {
	ws := words(s)
	if len(ws) == 0 {
		return ""
	}
	return ws[len(ws)-1]
}

// secondWord returns the second lower-case word of s.
func secondWord(s string) string {
	ws := words(s)
	if len(ws) < 2 {
		return ""
	}
	return ws[1]
}
