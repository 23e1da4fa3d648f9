package memory

import "strings"

// Importance heuristic. A memory starts at importanceBase; each kind of cue found in its
// lowercased text adds its weight once; the result is capped at 1:
//   - an explicit request to remember ("remember", "don't forget", "note that", "keep in
//     mind", "important"): +0.4
//   - a preference ("prefer", "favorite", "i like", "i love", "i hate", "always", "never"...): +0.2
//   - a personal fact such as a name ("my name", "call me", "i live", "i work", "my email"...): +0.2
//   - a number (dates, amounts, identifiers): +0.1
const importanceBase = 0.2

var importanceCues = []struct {
	weight float64
	cues   []string
}{
	{0.4, []string{"remember", "don't forget", "do not forget", "note that", "keep in mind", "important"}},
	{0.2, []string{"prefer", "favorite", "favourite", "i like", "i love", "i hate", "i dislike", "i don't like", "always", "never"}},
	{0.2, []string{"my name", "call me", "i live", "i work", "my birthday", "my email", "my phone", "my address", "i am allergic"}},
	{0.1, []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}},
}

// importance scores how worth remembering text is, in [importanceBase, 1].
func importance(text string) float64 {
	lower := strings.ToLower(text)
	score := importanceBase
	for _, group := range importanceCues {
		for _, cue := range group.cues {
			if strings.Contains(lower, cue) {
				score += group.weight
				break
			}
		}
	}
	return min(score, 1)
}
