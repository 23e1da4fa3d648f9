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
	var found []span
	if lower := strings.ToLower(goal); strings.Contains(lower, "no ") {
		rules = append(slices.Clip(rules), constraintRule{pattern: noTools})
		found = noToolSpans(goal, lower, tools)
	}
	for _, r := range rules {
		for _, loc := range r.pattern.FindAllStringIndex(goal, -1) {
			sp := trimmed(goal, loc[0], loc[1])
			prev, next := lastWord(goal[:sp.start]), secondWord(goal[sp.start:sp.end])
			if r.skip != nil && r.skip(prev, next) {
				continue
			}
			found = append(found, sp)
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

// trimmed returns the span of the phrase of goal found from start to end, ended at a
// conjunction that starts a new clause (clauseEnd) and without the punctuation it ends with.
func trimmed(goal string, start, end int) span {
	if cut := clauseEnd.FindStringIndex(goal[start:end]); cut != nil {
		end = start + cut[0]
	}
	return span{start, start + len(strings.TrimRight(goal[start:end], " ,.;:!?"))}
}

// noLead matches where "no" and a tool's name may start: the start of every match of a
// tool's pattern in noToolSpans.
var noLead = regexp.MustCompile(`(?i)\bno\s`)

// noToolSpans returns the phrases of goal that are "no" and one of the tools (a tool's name in
// any of its forms, toolForms, after an optional "the", and an optional "tool" or "tools"),
// each tool's in order of appearance; lower is goal in lower case. A tool's pattern is matched
// only after a "no" (noLead) that one of its forms follows, found once for all the tools:
// matching each tool's all through the goal made a long message that names many tools cost
// seconds.
func noToolSpans(goal, lower string, tools []string) []span {
	var leads []nameAt
	for _, loc := range noLead.FindAllStringIndex(goal, -1) {
		leads = append(leads, newNameAt(goal, loc[0], loc[0]+len("no")))
	}
	var found []span
	for _, tool := range tools {
		forms := toolForms(tool)
		if strings.TrimSpace(tool) == "" || !mentions([]string{lower}, forms) {
			continue
		}
		starts := leadForms(forms)
		var pattern *regexp.Regexp
		end := 0 // matches do not overlap, as a search through the goal finds them
		for _, l := range leads {
			if l.at < end || !l.names(goal, starts) {
				continue
			}
			if pattern == nil {
				pattern = regexp.MustCompile(`(?i)^no\s+(?:the\s+)?` + namesPattern(forms) +
					`(?:\s+tools?)?\b`)
			}
			if loc := pattern.FindStringIndex(goal[l.at:]); loc != nil {
				end = l.at + loc[1]
				found = append(found, trimmed(goal, l.at, end))
			}
		}
	}
	return found
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
