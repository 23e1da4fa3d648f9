package planning

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/toolname"
)

var (
	// listMarker matches a numbered or bulleted line's marker.
	listMarker = regexp.MustCompile(`^\s*(?:\d+[.)]|[-*•])\s+`)
	// clauseSeparator splits a line into sequential clauses.
	clauseSeparator = regexp.MustCompile(`(?i)\s*;\s*|,?\s+and then\s+|,?\s+then\s+`)
	// sequenceWord is a leading word that only orders a clause.
	sequenceWord = regexp.MustCompile(`(?i)^(?:(?:and\s+)?then|first|next|finally|after that|afterwards)\b,?\s*`)
	// codeLike matches a clause that reads as code rather than as a request: it has a brace, a
	// bracket, an equals sign, an angle bracket, && or ||, or a word directly followed by "("
	// ("total += price[0]", "i < n", "int main() {", "printf(x)").
	codeLike = regexp.MustCompile(`[{}\[\]=<>]|&&|\|\||\w\(`)
	// givenText matches the colon that introduces the text a request gives: a colon followed
	// by white space and more text ("proofread: the river rose; …").
	givenText = regexp.MustCompile(`:\s+\S`)
	// announcesSteps matches a clause whose colon introduces steps to do rather than text to
	// work on ("do the following", "follow these steps", "tasks").
	announcesSteps = regexp.MustCompile(`(?i)^(?:(?:please\s+)?(?:do|perform|complete|carry out|follow|execute)\b|(?:steps|tasks|to-?dos?|instructions)$)`)
	// exceptTools marks the tools a constraint that rules out tools in general keeps ("don't
	// use tools other than the calculator").
	exceptTools = regexp.MustCompile(`\b(?:other than|except(?: for)?|besides|but|apart from)\b`)
	// negativeConstraint starts a constraint that rules something out.
	negativeConstraint = regexp.MustCompile(`(?i)^\s*(?:without|don[’']t|do not|never|no)\b`)
	// noTools is a constraint that rules out tools in general ("without tools", "don't use
	// any tools", "never call a tool"), not one tool ("without the calculator tool").
	noTools = regexp.MustCompile(`(?i)^\s*(?:without|don[’']t|do not|never|no)\s+(?:(?:use|using|call|calling)\s+)?(?:any\s+|a\s+)?(?:external\s+)?tools?\b`)
)

// generate makes a sequential plan from the goal, one step per clause.
func generate(goal, taskType string, constraints []string, tools []*typev1.Tool, limit int) ([]*typev1.Step, error) {
	usable := usableTools(tools, constraints)
	switch {
	case taskType == "action" && len(tools) == 0:
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN,
			"the goal %q is an action that needs a tool but none is available", goal)
	case taskType == "action" && len(usable) == 0:
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN,
			"the goal %q is an action that needs a tool but the constraints rule out every available tool (%s)", goal, strings.Join(toolname.Of(tools), ", "))
	}
	clauses := splitClauses(goal)
	if len(clauses) > limit {
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PLAN_TOO_COMPLEX,
			"the goal has %d steps, the limit is %d", len(clauses), limit)
	}
	m := newMatcher(usable)
	steps := make([]*typev1.Step, len(clauses))
	for i, c := range clauses {
		steps[i] = &typev1.Step{Id: fmt.Sprintf("step-%d", i+1), Description: c, ToolName: m.best(c)}
		if i > 0 {
			steps[i].DependsOn = []string{steps[i-1].GetId()}
		}
	}
	return steps, nil
}

// splitClauses splits a goal into its sequential clauses; a goal without separators is one
// clause. The text a request gives after a colon ("summarize this article: …") is the
// material of the clause before the colon, unless that clause announces steps ("do the
// following: …"). A clause that reads as code stays with the clause before it, joined by the
// separator that was between them: pasted code is the material of a step, not a step per
// statement. A clause without a letter or digit ("?!?") is no step.
func splitClauses(goal string) []string {
	if loc := givenText.FindStringIndex(goal); loc != nil {
		clauses := separate(goal[:loc[0]])
		if n := len(clauses); n > 0 && !announcesSteps.MatchString(clauses[n-1]) {
			clauses[n-1] += ": " + strings.TrimRight(strings.TrimSpace(goal[loc[0]+1:]), " .,;")
			return clauses
		}
	}
	if clauses := separate(goal); len(clauses) > 0 {
		return clauses
	}
	return []string{goal}
}

// separate splits text into its sequential clauses (see splitClauses), none when it has no
// clause.
func separate(text string) []string {
	var parts [][]string // each clause's pieces: its text, then each separator and clause of code it took in
	for line := range strings.Lines(text) {
		line = listMarker.ReplaceAllString(line, "")
		seps := clauseSeparator.FindAllString(line, -1)
		join := " " // a clause of code continues the last clause of the line before
		for i, c := range clauseSeparator.Split(line, -1) {
			if i > 0 {
				if join = strings.TrimSpace(seps[i-1]) + " "; join != "; " {
					join = " " + join
				}
			}
			c = strings.TrimSpace(c)
			for {
				next := sequenceWord.ReplaceAllString(c, "")
				if next == c {
					break
				}
				c = next
			}
			c = strings.TrimRight(c, " .,;")
			switch {
			case c == "":
			case len(parts) > 0 && codeLike.MatchString(c):
				parts[len(parts)-1] = append(parts[len(parts)-1], join, c)
			case !strings.ContainsFunc(c, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }):
				// "???": nothing to do (a message the intent stage asked about, joined to the
				// answer at a line break); a goal of nothing else stays one clause.
			default:
				parts = append(parts, []string{c})
			}
		}
	}
	clauses := make([]string, len(parts))
	for i, p := range parts {
		clauses[i] = strings.Join(p, "")
	}
	return clauses
}

// usableTools drops the tools a negative constraint rules out ("without web_search", "don't
// use the calculator"), or all of them ("without using any tools").
func usableTools(tools []*typev1.Tool, constraints []string) []*typev1.Tool {
	bans := parseBans(constraints)
	var out []*typev1.Tool
	for _, t := range tools {
		if !ruledOut(t.GetName(), bans) {
			out = append(out, t)
		}
	}
	return out
}

// ban is a negative constraint, lowercased, as ruledOut reads it.
type ban struct {
	text string
	// allTools: the constraint rules out tools in general ("without using any tools").
	allTools bool
	// kept, when set, is what follows the exception of a constraint that rules out tools in
	// general but some ("don't use tools other than the calculator"): the tools it names.
	kept *string
}

// parseBans returns the negative constraints of a request, read once for all of its tools:
// a request may offer thousands of tools and give a thousand constraints.
func parseBans(constraints []string) []ban {
	var bans []ban
	for _, c := range constraints {
		if !negativeConstraint.MatchString(c) {
			continue
		}
		c = strings.ToLower(c)
		b := ban{text: c, allTools: noTools.MatchString(c)}
		if loc := exceptTools.FindStringIndex(c); loc != nil && b.allTools {
			kept := c[loc[1]:]
			b.kept = &kept
		}
		bans = append(bans, b)
	}
	return bans
}

// ruledOut reports whether a negative constraint names the tool, as written or with "_" and
// "-" read as spaces, or rules out tools in general.
func ruledOut(name string, bans []ban) bool {
	lower := strings.ToLower(name)
	spaced := strings.Join(nameWords(lower), " ")
	names := func(s string) bool {
		return strings.Contains(s, lower) || (spaced != "" && strings.Contains(s, spaced))
	}
	for _, b := range bans {
		if b.kept != nil {
			// "don't use tools other than the calculator": all but those named after the
			// exception.
			if !names(*b.kept) {
				return true
			}
			continue
		}
		if b.allTools || names(b.text) {
			return true
		}
	}
	return false
}
