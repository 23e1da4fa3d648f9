package memory

import (
	"regexp"
	"strings"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// Limits of the facts learned from one run.
const (
	// MaxFactsPerRun is the most facts one run adds to a user's memory.
	MaxFactsPerRun = 20
	// MaxFactBytes is the longest fact stored; a longer one is cut at a word boundary.
	MaxFactBytes = 1000
)

// Importance of the facts the rules pick.
const (
	// importanceAsked is a fact the user asked to be remembered ("remember that …").
	importanceAsked = 0.9
	// importanceStated is a fact the user stated about themselves ("my X is Y").
	importanceStated = 0.6
)

// fact is one thing worth remembering about a user.
type fact struct {
	text       string
	importance float64
}

// statements turn a first-person statement into a fact about the user; each pattern matches a
// whole sentence (lowercase match, the user's own spelling kept).
var statements = []struct {
	pattern *regexp.Regexp
	fact    string // regexp.Expand template
}{
	{regexp.MustCompile(`(?i)^my ([\pL\pN' -]{1,40}?) (is|are) (.+)$`), "The user's $1 $2 $3."},
	{regexp.MustCompile(`(?i)^(?:i am|i'm) allergic to (.+)$`), "The user is allergic to $1."},
	{regexp.MustCompile(`(?i)^(?:please )?call me (.+)$`), "The user wants to be called $1."},
	{regexp.MustCompile(`(?i)^i live in (.+)$`), "The user lives in $1."},
	{regexp.MustCompile(`(?i)^i work (at|for|as|in|on) (.+)$`), "The user works $1 $2."},
	{regexp.MustCompile(`(?i)^i (?:always )?prefer (.+)$`), "The user prefers $1."},
}

// askedToRemember matches an explicit request to remember something; the text to remember is
// its group.
var askedToRemember = regexp.MustCompile(`(?i)^(?:(?:i want you to|i'd like you to|can you|could you|would you|will you)\s+)?` +
	`(?:remember|don't forget|do not forget|never forget|keep in mind|note that|note:)(?:\s+that\b|:|,)?\s*(.+)$`)

// fillers open a sentence without changing what it says.
var fillers = regexp.MustCompile(`(?i)^(?:(?:and|also|oh|ok|okay|so|hi|hello|hey|btw|by the way|fyi|just so you know|for the record|please)\b[,:!]?\s*)+`)

// secret marks a sentence never remembered, whether the rules or the model picked it:
// credentials (a password, a key, a token) and payment details do not belong in memory. Each
// word is matched in the plural too.
var secret = regexp.MustCompile(`(?i)\b(?:passwords?|passphrases?|passcodes?|pins?|(?:api[ _-]?)?keys?|secrets?|tokens?|` +
	`(?:credit|debit|bank|payment) cards?|card numbers?|cvv|cvc|iban|bank accounts?|account numbers?|routing numbers?|social security|ssn)\b`)

// sentenceEnd splits a message into sentences, keeping each sentence's closing mark.
var sentenceEnd = regexp.MustCompile(`[.!?]+(?:\s+|$)|\n+`)

// ruleFacts picks the facts of a conversation with the deterministic rules: in each of the
// user's messages, every sentence that asks to remember something ("remember that …", "don't
// forget: …", "keep in mind that …", "note that …"; importance 0.9) or states a fact about the
// user ("my X is Y", "I am allergic to X", "call me X", "I live in X", "I work at X", "I prefer
// X"; importance 0.6). A statement becomes a fact about "the user" ("my name is Sam" → "The
// user's name is Sam."); a request to remember anything else keeps the user's words ("The user
// asked to remember: …"). Questions and sentences naming credentials or payment details are
// left out. At most MaxFactsPerRun facts, in the order the user said them.
func ruleFacts(conversation []*typev1.Message) []fact {
	var facts []fact
	for _, m := range conversation {
		if m.GetRole() != typev1.Role_ROLE_USER {
			continue
		}
		for _, s := range sentences(m.GetContent()) {
			if f, ok := sentenceFact(s); ok {
				facts = append(facts, f)
				if len(facts) == MaxFactsPerRun {
					return facts
				}
			}
		}
	}
	return facts
}

// sentences splits text into trimmed sentences, each with its closing mark.
func sentences(text string) []string {
	var out []string
	start := 0
	for _, loc := range sentenceEnd.FindAllStringIndex(text, -1) {
		if s := strings.TrimSpace(text[start:loc[1]]); s != "" {
			out = append(out, s)
		}
		start = loc[1]
	}
	if s := strings.TrimSpace(text[start:]); s != "" {
		out = append(out, s)
	}
	return out
}

// sentenceFact is the fact one sentence states, if any.
func sentenceFact(sentence string) (fact, bool) {
	if strings.HasSuffix(sentence, "?") || secret.MatchString(sentence) {
		return fact{}, false
	}
	s := clause(sentence)
	if m := askedToRemember.FindStringSubmatch(s); m != nil {
		body := clause(m[1])
		if body == "" || strings.HasPrefix(strings.ToLower(body), "to ") { // "remember to …" asks for a reminder
			return fact{}, false
		}
		if text, ok := statement(body); ok {
			return fact{text: text, importance: importanceAsked}, true
		}
		return fact{text: "The user asked to remember: " + body + ".", importance: importanceAsked}, true
	}
	if text, ok := statement(s); ok {
		return fact{text: text, importance: importanceStated}, true
	}
	return fact{}, false
}

// clause is a sentence without its opening fillers and closing marks.
func clause(s string) string {
	s = fillers.ReplaceAllString(strings.TrimSpace(s), "")
	return strings.TrimSpace(strings.TrimRight(s, ".!;, \t"))
}

// statement turns a first-person statement into a fact about the user.
func statement(s string) (string, bool) {
	for _, st := range statements {
		if m := st.pattern.FindStringSubmatchIndex(s); m != nil {
			return string(st.pattern.ExpandString(nil, st.fact, s, m)), true
		}
	}
	return "", false
}

// clip cuts text to at most n bytes at a word boundary, marking the cut with "…".
func clip(text string, n int) string {
	if len(text) <= n {
		return text
	}
	cut := text[:n-len("…")]
	if i := strings.LastIndexAny(cut, " \n\t"); i > n/2 {
		cut = cut[:i]
	}
	return strings.ToValidUTF8(cut, "") + "…"
}
