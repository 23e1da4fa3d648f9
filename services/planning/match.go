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

// matcher picks the available tool whose keywords overlap a clause most. It indexes the
// tools by their stems, so that a clause's words look up the tools they match: a request may
// offer a thousand tools, with a megabyte of descriptions, and a goal of a thousand clauses.
type matcher struct {
	names       []string // the tools' names, in order
	calculating []bool   // whether a tool's stems say it computes
	name, desc  stemIndex
}

// newMatcher indexes the keywords of tools, in order.
func newMatcher(tools []*typev1.Tool) *matcher {
	m := &matcher{
		names: make([]string, len(tools)), calculating: make([]bool, len(tools)),
		name: stemIndex{tools: map[string][]int{}}, desc: stemIndex{tools: map[string][]int{}},
	}
	for i, t := range tools {
		m.names[i] = t.GetName()
		nameStems := stems(nameWords(strings.ToLower(t.GetName())))
		descStems := stems(textWords(t.GetDescription()))
		m.name.add(nameStems, i)
		m.desc.add(descStems, i)
		m.calculating[i] = slices.ContainsFunc(nameStems, computes) ||
			slices.ContainsFunc(descStems, computes)
	}
	slices.Sort(m.name.sorted)
	slices.Sort(m.desc.sorted)
	return m
}

// computes reports whether a stem is one of a tool that computes.
func computes(stem string) bool {
	return slices.ContainsFunc(calculating, func(c string) bool { return strings.HasPrefix(stem, c) })
}

// stemIndex maps stems to the tools that have them.
type stemIndex struct {
	tools  map[string][]int // the indexes of the tools with a stem, ascending
	sorted []string         // the stems, sorted once all are added
}

// add indexes the distinct stems of tool i.
func (x *stemIndex) add(stems []string, i int) {
	for _, st := range stems {
		if _, ok := x.tools[st]; !ok {
			x.sorted = append(x.sorted, st)
		}
		x.tools[st] = append(x.tools[st], i)
	}
}

// each calls visit with the tools of every stem that matches w (stemMatch): w itself, the
// longer stems w starts when it has minPrefixStem letters, and the stems of at least
// minPrefixStem letters that start w.
func (x *stemIndex) each(w string, visit func(tools []int)) {
	visit(x.tools[w])
	if len(w) >= minPrefixStem {
		i, _ := slices.BinarySearch(x.sorted, w)
		for ; i < len(x.sorted) && strings.HasPrefix(x.sorted[i], w); i++ {
			if x.sorted[i] != w {
				visit(x.tools[x.sorted[i]])
			}
		}
	}
	for n := minPrefixStem; n < len(w); n++ {
		visit(x.tools[w[:n]])
	}
}

// arithmeticWeight favours a calculating tool for an arithmetic clause ("6 times 7",
// "(2+3)*4"), which keyword overlap alone gets wrong ("times" stems like "time").
const arithmeticWeight = 3

// arithmetic matches a number, an operator (symbol or word) and another number.
var arithmetic = regexp.MustCompile(`\d\s*(?:[-+*/x×÷^%]|plus|minus|times|multiplied by|divided by|over|to the power of)\s*\(?\s*-?\d`)

// calculating are the stems of tools that compute.
var calculating = []string{"calcul", "arithmet", "math", "comput"}

// best returns the name of the tool with the highest positive score for the clause, the
// first listed on a tie, or "" when no tool overlaps. A word of the clause scores
// nameWeight for a tool whose name has a stem it matches, else descriptionWeight for one
// whose description has.
func (m *matcher) best(clause string) string {
	score := make([]int, len(m.names))
	if arithmetic.MatchString(strings.ToLower(clause)) {
		for i, c := range m.calculating {
			if c {
				score[i] += arithmeticWeight
			}
		}
	}
	named := make([]int, len(m.names)) // the last word (1, 2 ...) that scored a tool by name
	described := make([]int, len(m.names))
	for i, w := range stems(textWords(clause)) {
		word := i + 1
		m.name.each(w, func(tools []int) {
			for _, t := range tools {
				if named[t] != word {
					named[t], score[t] = word, score[t]+nameWeight
				}
			}
		})
		m.desc.each(w, func(tools []int) {
			for _, t := range tools {
				if named[t] != word && described[t] != word {
					described[t], score[t] = word, score[t]+descriptionWeight
				}
			}
		})
	}
	best, bestScore := "", 0
	for i, sc := range score {
		if sc > bestScore {
			best, bestScore = m.names[i], sc
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
