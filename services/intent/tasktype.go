package intent

import (
	"regexp"
	"slices"
	"strings"
	"unicode"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
)

var (
	// analysisWords and analysisPhrases mark a request to analyse given material.
	analysisWords = []string{"analyze", "analyse", "analysis", "compare", "comparison", "summarize",
		"summarise", "summary", "evaluate", "assess", "critique"}
	analysisPhrases = []string{"explain why", "pros and cons"}
	// creativeWords mark a request for new content.
	creativeWords = []string{"poem", "poems", "story", "stories", "song", "songs", "lyrics", "haiku",
		"limerick", "imagine", "compose", "fiction"}
	// imperativeVerbs start a request to do something.
	imperativeVerbs = []string{"create", "add", "delete", "remove", "run", "execute", "send", "calculate",
		"compute", "search", "fetch", "install", "build", "deploy", "update", "edit", "rename", "move",
		"copy", "save", "download", "upload", "open", "list", "set", "schedule", "book", "convert",
		"check", "find", "get", "show", "make"}
	// writingVerbs start a request for new text.
	writingVerbs = []string{"write", "draft"}
	// writesFile matches a request to write to a file.
	writesFile = regexp.MustCompile(`\b(?:write|save)\b[^.?!]*\b(?:files?|disk)\b`)
)

// words returns the lower-case words of s (letters, digits and apostrophes).
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
	})
}

// classify returns the task type of a goal by the cue rules of the package documentation.
func classify(goal string) intentv1.TaskType {
	ws := words(goal)
	joined := " " + strings.Join(ws, " ") + " "
	hasAny := func(cues []string) bool {
		return slices.ContainsFunc(ws, func(w string) bool { return slices.Contains(cues, w) })
	}
	first := ""
	if len(ws) > 0 {
		first = ws[0]
	}
	switch {
	case hasAny(analysisWords) || slices.ContainsFunc(analysisPhrases, func(p string) bool { return strings.Contains(joined, " "+p+" ") }):
		return intentv1.TaskType_TASK_TYPE_ANALYSIS
	case hasAny(creativeWords):
		return intentv1.TaskType_TASK_TYPE_CREATIVE
	case slices.Contains(imperativeVerbs, first) || writesFile.MatchString(strings.ToLower(goal)):
		return intentv1.TaskType_TASK_TYPE_ACTION
	case slices.Contains(writingVerbs, first):
		return intentv1.TaskType_TASK_TYPE_CREATIVE
	default:
		return intentv1.TaskType_TASK_TYPE_QUESTION
	}
}
