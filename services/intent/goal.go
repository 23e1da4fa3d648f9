package intent

import (
	"regexp"
	"strings"
)

var (
	// politeOpener matches one polite opener at the start of a goal.
	politeOpener = regexp.MustCompile(`(?i)^(?:please|kindly|can you|could you|would you(?: mind)?|will you|i (?:want|need) you to|i(?: would|'d|’d) like you to)\b[\s,:]*`)
	// politeCloser matches a trailing "please", keeping the final punctuation in group 1.
	politeCloser = regexp.MustCompile(`(?i)[\s,]+please([.!?]*)$`)
)

// collapse trims s and replaces every run of whitespace with one space.
func collapse(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// collapseLines collapses (see collapse) each line of s and joins the lines that have content
// with one line break: a request's lines are its list items or its steps ("1. … 2. …"), which
// the planning stage splits a goal at, so they stay apart.
func collapseLines(s string) string {
	var lines []string
	for line := range strings.Lines(s) {
		if line = collapse(line); line != "" {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "\n")
}

// cleanGoal returns the message trimmed, whitespace collapsed within its lines (see
// collapseLines) and polite openers and closers removed. It never returns an empty string for
// a message with content: when cleaning leaves nothing, the collapsed message itself is the
// goal.
func cleanGoal(msg string) string {
	text := collapseLines(msg)
	goal := text
	for {
		next := strings.TrimSpace(politeOpener.ReplaceAllString(goal, ""))
		if next == goal {
			break
		}
		goal = next
	}
	goal = strings.TrimSpace(politeCloser.ReplaceAllString(goal, "$1"))
	if strings.Trim(goal, ".!?, \n") == "" {
		return text
	}
	return goal
}
