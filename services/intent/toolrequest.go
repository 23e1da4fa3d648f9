package intent

import (
	"regexp"
	"slices"
	"strings"
)

var (
	// clauseBreak separates the clauses of a goal: sentence punctuation, commas and dashes,
	// and the conjunctions that start another request.
	clauseBreak = regexp.MustCompile(`[.!?;:,\n]+(?:\s+|$)|\s+[-–—]+\s+|\s+(?:and|then|but|also)\s+`)
	// clauseOpener matches words that open a request without changing it ("please", "can
	// you", "you should", "just", "then").
	clauseOpener = regexp.MustCompile(`^(?:please|kindly|can you|could you|would you(?: mind)?|will you|i (?:want|need) you to|i(?: would|'d) like you to|` +
		`you (?:should|must|need to|have to)|make sure (?:to|you)|go ahead and|just|now|first|then|also|and|so)\b[\s,]*`)
	// negation marks a clause that asks not to use something.
	negation = regexp.MustCompile(`\b(?:not|don't|dont|never|without|no|avoid|instead of)\b`)
	// useVerbs ask for a tool when they open a clause: "use the calculator", "call current_time".
	useVerbs = []string{"use", "call", "invoke", "run", "try"}
	// instruments ask for a tool inside a request: "check with the current time tool".
	instruments = []string{"using", "with", "via", "through"}
	// notRequests open a clause that is a question or a statement, not a request: "what's
	// wrong with the calculator?", "did you use web search?", "my problem is with the calculator".
	notRequests = []string{"what", "what's", "which", "who", "who's", "whom", "whose", "when", "where", "why", "how", "how's",
		"is", "are", "was", "were", "am", "do", "does", "did", "can", "could", "would", "will", "should", "shall", "may",
		"might", "must", "has", "have", "had", "isn't", "aren't", "wasn't", "doesn't", "didn't", "can't", "won't",
		"i", "i'm", "i've", "i'd", "we", "we're", "you", "you're", "he", "she", "they", "it", "it's", "my", "our", "your",
		"their", "his", "her", "its", "this", "that", "these", "those", "there", "there's", "a", "an", "the", "if"}
)

// toolAfter is what may follow the tool's name in a request for it: the end of the clause, a
// punctuation mark, "tool", or a word that goes on with the request ("use the calculator to
// add", "call current_time and tell me"). "The calculator homework" names something else.
const toolAfter = `(?:$|[^\w\s]|\s+(?:tool|tools|to|and|then|for|on|in|instead|please|now|first|here|again|if|so|or|when)\b)`

// namedTool returns the first available tool the goal explicitly asks for: a clause that
// opens with a verb of use aimed at it ("use the calculator to add 2 and 3", "call
// current_time"), or a request that names it as its means ("check with the current time
// tool", "look this up via web search"). A clause that is a question or a statement ("is a
// calculator allowed?", "what's wrong with the calculator?"), or that asks not to use it
// ("don't use the calculator", "without web search"), asks for no tool.
func namedTool(goal string, tools []string) (string, bool) {
	var clauses []clause
	for _, text := range requestClauses(goal) {
		clauses = append(clauses, newClause(text))
	}
	for _, tool := range tools {
		if strings.TrimSpace(tool) == "" {
			continue
		}
		forms := toolForms(tool)
		var req *toolRequest // compiled for the first clause that names the tool
		for _, c := range clauses {
			// Only a clause that names the tool can ask for it: compiling its patterns and
			// matching them is most of what a goal costs the stage.
			if !mentionedIn(c.text, forms) {
				continue
			}
			if req == nil {
				req = newToolRequest(forms)
			}
			if req.askedIn(c) {
				return tool, true
			}
		}
	}
	return "", false
}

// requestClauses returns the clauses of a goal in lower case, their openers removed.
func requestClauses(goal string) []string {
	text := strings.ToLower(strings.ReplaceAll(goal, "’", "'"))
	var out []string
	for _, c := range clauseBreak.Split(text, -1) {
		c = strings.TrimSpace(c)
		for {
			next := strings.TrimSpace(clauseOpener.ReplaceAllString(c, ""))
			if next == c {
				break
			}
			c = next
		}
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// instrument matches where a tool may be named as the means of a request: the start of every
// match of a toolRequest's means.
var instrument = regexp.MustCompile(`\b(?:` + strings.Join(instruments, "|") + `)\s`)

// clause is a clause of a goal (lower case, openers removed) with what every tool's requests
// look for in it, found once for all the tools.
type clause struct {
	text string
	// first is its first word.
	first string
	// instruments are where its instruments (instrument) are, in order.
	instruments []nameAt
}

// newClause returns the clause of text.
func newClause(text string) clause {
	c := clause{text: text}
	c.first, _, _ = strings.Cut(text, " ")
	for _, loc := range instrument.FindAllStringIndex(text, -1) {
		c.instruments = append(c.instruments, newNameAt(text, loc[0], loc[1]-1))
	}
	return c
}

// toolRequest recognises the requests for one tool.
type toolRequest struct {
	// use matches a clause that opens with a verb of use aimed at the tool.
	use *regexp.Regexp
	// means matches the tool named as the means of a request, at the start of the text (at one
	// of a clause's instruments).
	means *regexp.Regexp
	// starts are the forms of the tool's name as nameAt.names looks for them (leadForms).
	starts []string
}

// newToolRequest returns the requests for the tool of the name forms (toolForms).
func newToolRequest(forms []string) *toolRequest {
	names := namesPattern(forms)
	return &toolRequest{
		use: regexp.MustCompile(`^(?:` + strings.Join(useVerbs, "|") + `)\s+(?:the\s+)?` +
			names + toolAfter),
		means: regexp.MustCompile(`^(?:` + strings.Join(instruments, "|") + `)\s+(?:the\s+)?` +
			names + toolAfter),
		starts: leadForms(forms),
	}
}

// askedIn reports whether a clause asks for the tool: it opens with a verb of use aimed at it,
// or, unless it is a question or a statement, names it as its means at its first instrument
// that does, with no negation before.
func (q *toolRequest) askedIn(c clause) bool {
	switch {
	case slices.Contains(useVerbs, c.first):
		return q.use.MatchString(c.text)
	case slices.Contains(notRequests, c.first):
		return false
	}
	for _, at := range c.instruments {
		if at.names(c.text, q.starts) && q.means.MatchString(c.text[at.at:]) {
			return !negation.MatchString(c.text[:at.at])
		}
	}
	return false
}

// toolForms returns the forms of a tool's name a message may use, in lower case: the name,
// the name with _ and - read as spaces, and the part after a server prefix ("fs__read_file" →
// "read file").
func toolForms(tool string) []string {
	name := strings.ToLower(tool)
	forms := []string{name}
	if i := strings.LastIndex(name, "__"); i >= 0 && i+2 < len(name) {
		forms = append(forms, name[i+2:])
	}
	for _, f := range slices.Clone(forms) {
		forms = append(forms, strings.Join(strings.FieldsFunc(f, func(r rune) bool { return r == '_' || r == '-' }), " "))
	}
	return slices.Compact(forms)
}

// mentions reports whether a clause holds one of the forms: a clause that names the tool in
// none of them cannot ask for it.
func mentions(clauses, forms []string) bool {
	return slices.ContainsFunc(clauses, func(c string) bool { return mentionedIn(c, forms) })
}

// mentionedIn reports whether text holds one of the forms.
func mentionedIn(text string, forms []string) bool {
	return slices.ContainsFunc(forms, func(f string) bool { return strings.Contains(text, f) })
}

// namesPattern returns a pattern matching any of the forms.
func namesPattern(forms []string) string {
	alts := make([]string, 0, len(forms))
	for _, f := range forms {
		alts = append(alts, regexp.QuoteMeta(f))
	}
	return `(?:` + strings.Join(alts, "|") + `)`
}
