package intent

import "slices"

// vagueWords is the vocabulary of messages too vague to act on ("help", "do it", "fix this").
var vagueWords = []string{"help", "me", "us", "do", "it", "this", "that", "fix", "something",
	"anything", "stuff", "thing", "things", "make", "work", "please", "now", "again", "with", "the",
	"out", "up", "sort", "go", "on"}

// maxVagueWords is the longest message that can be too vague to act on.
const maxVagueWords = 4

// clarification returns the question to ask when a goal is too vague to act on: at most
// maxVagueWords words, all from vagueWords.
func clarification(goal string) (string, bool) {
	ws := words(goal)
	if len(ws) == 0 || len(ws) > maxVagueWords {
		return "", false
	}
	for _, w := range ws {
		if !slices.Contains(vagueWords, w) {
			return "", false
		}
	}
	return "“" + goal + "” is too vague for me to act on. What exactly would you like me to do, and on what?", true
}
