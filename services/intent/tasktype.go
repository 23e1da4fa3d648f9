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
	// worldVerbs start a request to act outside the conversation: on files, programs,
	// messages, bookings or the web.
	worldVerbs = []string{"delete", "remove", "run", "execute", "send", "search", "fetch", "install",
		"deploy", "rename", "move", "copy", "save", "download", "upload", "open", "set", "schedule", "book"}
	// textVerbs start a request that text can answer ("list three benefits of exercise",
	// "calculate 17 * 23", "check my grammar: …") unless it names something outside the
	// conversation to work on (worksOutside).
	textVerbs = []string{"create", "add", "calculate", "compute", "build", "update", "edit", "list",
		"convert", "check", "find", "get", "show", "make"}
	// outsideThing names a thing outside the conversation: a file, directory, repository,
	// database, branch or web address.
	outsideThing = regexp.MustCompile(`(?i)\b(?:files?|director(?:y|ies)|folders?|repos?|repositor(?:y|ies)|databases?|branch(?:es)?)\b|https?://|\bwww\.`)
	// ownThing names the user's own data, kept outside the conversation ("my meetings", "our
	// orders"); "my options" or "my essay" need not be.
	ownThing = regexp.MustCompile(`(?i)\b(?:my|our)\s+(?:[\pL-]+\s+)?(?:inbox|e-?mails?|mail|messages?|calendars?|meetings?|appointments?|schedule|events?|contacts?|tasks?|to-?dos?|reminders?|notes|documents?|photos?|orders?|bookings?|reservations?|accounts?|balance|servers?|files?)\b`)
	// givenMaterial is a goal that gives what it is about after a colon ("check my grammar:
	// me go store").
	givenMaterial = regexp.MustCompile(`:\s+\S`)
	// writingVerbs start a request for new text.
	writingVerbs = []string{"write", "draft"}
	// writesFile matches a request to write to a file.
	writesFile = regexp.MustCompile(`\b(?:write|save)\b[^.?!]*\b(?:files?|disk)\b`)
)

// explaining words open a sentence that asks for an explanation, not for work: "how do I
// write a file in Go?", "why would you delete a directory?", "explain how to create a file".
var explaining = []string{"what", "what's", "whats", "which", "who", "whom", "whose", "when", "where", "why",
	"how", "how's", "explain"}

// compoundLead matches a goal that opens with a hyphenated compound ("test-driven",
// "run-time"), whose first part is not a verb of its own.
var compoundLead = regexp.MustCompile(`^[^\pL\pN]*[\pL\pN']+-[\pL\pN]`)

// leadWord returns the goal's first word in lower case, or "" when it has none or it is the
// first part of a hyphenated compound.
func leadWord(goal string) string {
	ws := words(goal)
	if len(ws) == 0 || compoundLead.MatchString(goal) {
		return ""
	}
	return ws[0]
}

// asked returns the first match of re in the goal in a sentence that asks for something
// rather than for an explanation, or "": a sentence that opens with one of explaining, or
// says "how" before the match, asks how or why ("how do I write a file in Go?", "what does
// `defer` do?", "tell me how to rename a file").
func asked(re *regexp.Regexp, goal string) string {
	for _, loc := range re.FindAllStringIndex(goal, -1) {
		start := strings.LastIndexAny(goal[:loc[0]], ".?!\n") + 1
		before := words(goal[start:loc[0]])
		if ws := words(goal[start:loc[1]]); len(ws) > 0 && !slices.Contains(explaining, ws[0]) && !slices.Contains(before, "how") {
			return goal[loc[0]:loc[1]]
		}
	}
	return ""
}

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
	first := leadWord(goal)
	switch {
	case slices.Contains(worldVerbs, first): // "send the summary to Bob" acts, whatever it sends
		return intentv1.TaskType_TASK_TYPE_ACTION
	case hasAny(analysisWords) || slices.ContainsFunc(analysisPhrases, func(p string) bool { return strings.Contains(joined, " "+p+" ") }):
		return intentv1.TaskType_TASK_TYPE_ANALYSIS
	case hasAny(creativeWords):
		return intentv1.TaskType_TASK_TYPE_CREATIVE
	case slices.Contains(textVerbs, first) && worksOutside(goal) ||
		asked(writesFile, strings.ToLower(goal)) != "":
		return intentv1.TaskType_TASK_TYPE_ACTION
	case slices.Contains(writingVerbs, first):
		return intentv1.TaskType_TASK_TYPE_CREATIVE
	default:
		return intentv1.TaskType_TASK_TYPE_QUESTION
	}
}

// worksOutside reports whether a goal names something outside the conversation to work on: a
// path, a file, a directory, a repository, a database, a branch or a web address, or, unless
// the message gives its material itself, the user's own things ("list my meetings").
func worksOutside(goal string) bool {
	return pathMention.MatchString(goal) || fileMention.MatchString(frameworkNames.ReplaceAllString(goal, "")) ||
		outsideThing.MatchString(goal) || ownThing.MatchString(goal) && !givenMaterial.MatchString(goal)
}
