package planning

import (
	"regexp"
	"slices"
	"strings"
	"unicode"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// Keyword weights of the tool matcher.
const (
	nameWeight        = 2
	descriptionWeight = 1
	// minPrefixStem is the shortest stem that matches longer words it starts
	// ("calcul" matches "calculat").
	minPrefixStem = 5
)

// stopWords carry no meaning for tool matching.
var stopWords = []string{"a", "an", "the", "to", "of", "and", "or", "for", "in", "on", "at", "by",
	"with", "from", "into", "is", "are", "be", "it", "its", "this", "that", "these", "those", "me",
	"my", "i", "you", "your", "we", "our", "what", "which", "who", "how", "when", "where", "why",
	"do", "does", "did", "can", "could", "would", "should", "will", "please", "then", "as", "about",
	"all", "any", "some", "get", "use", "using", "tool", "tools", "given", "return", "returns", "now"}

// suffixes are stripped, first match only, by stem.
var suffixes = []string{"ations", "ation", "ators", "ator", "ings", "ing", "ers", "er", "ed", "es", "ly", "s", "e"}

// toolKeys are the stemmed keywords of one tool.
type toolKeys struct {
	name      string
	nameStems []string
	descStems []string
}

// matcher picks the available tool whose keywords overlap a clause most.
type matcher struct{ tools []toolKeys }

// newMatcher indexes the keywords of tools, in order.
func newMatcher(tools []*typev1.Tool) *matcher {
	m := &matcher{tools: make([]toolKeys, 0, len(tools))}
	for _, t := range tools {
		m.tools = append(m.tools, toolKeys{
			name:      t.GetName(),
			nameStems: stems(nameWords(strings.ToLower(t.GetName()))),
			descStems: stems(textWords(t.GetDescription())),
		})
	}
	return m
}

// arithmeticWeight favours a calculating tool for an arithmetic clause ("6 times 7",
// "(2+3)*4"), which keyword overlap alone gets wrong ("times" stems like "time").
const arithmeticWeight = 3

// arithmetic matches a number, an operator (symbol or word) and another number.
var arithmetic = regexp.MustCompile(`\d\s*(?:[-+*/x×÷^%]|plus|minus|times|multiplied by|divided by|over|to the power of)\s*\(?\s*-?\d`)

// calculating are the stems of tools that compute.
var calculating = []string{"calcul", "arithmet", "math", "comput"}

// best returns the name of the tool with the highest positive score for the clause, the
// first listed on a tie, or "" when no tool overlaps.
func (m *matcher) best(clause string) string {
	words := stems(textWords(clause))
	isArithmetic := arithmetic.MatchString(strings.ToLower(clause))
	best, bestScore := "", 0
	for _, t := range m.tools {
		score := 0
		if isArithmetic && slices.ContainsFunc(append(slices.Clone(t.nameStems), t.descStems...), func(k string) bool {
			return slices.ContainsFunc(calculating, func(c string) bool { return strings.HasPrefix(k, c) })
		}) {
			score += arithmeticWeight
		}
		for _, w := range words {
			switch {
			case slices.ContainsFunc(t.nameStems, func(k string) bool { return stemMatch(w, k) }):
				score += nameWeight
			case slices.ContainsFunc(t.descStems, func(k string) bool { return stemMatch(w, k) }):
				score += descriptionWeight
			}
		}
		if score > bestScore {
			best, bestScore = t.name, score
		}
	}
	return best
}

// nameWords splits a tool name into words at "_", "-", "." and "/".
func nameWords(name string) []string {
	return strings.FieldsFunc(name, func(r rune) bool { return r == '_' || r == '-' || r == '.' || r == '/' })
}

// textWords returns the lower-case words of free text.
func textWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// stems returns the distinct stems of words that are not stop words, in the order of their
// first word: a tool's description may have a megabyte of words.
func stems(words []string) []string {
	var out []string
	seen := make(map[string]bool, len(words))
	for _, w := range words {
		if slices.Contains(stopWords, w) {
			continue
		}
		if s := stem(w); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// stem strips the first matching suffix when at least three letters remain.
func stem(w string) string {
	for _, s := range suffixes {
		if rest, ok := strings.CutSuffix(w, s); ok && len(rest) >= 3 {
			return rest
		}
	}
	return w
}

// stemMatch reports whether two stems match: equal, or the shorter one has at least
// minPrefixStem letters and starts the other.
func stemMatch(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return a == b || (len(a) >= minPrefixStem && strings.HasPrefix(b, a))
}
