package action

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/agentmesh/agentmesh/services/action/mcp"
)

// riskyWords are the name words that make a tool require approval by default: tools that
// write, delete, run commands or spend money (DESIGN §10).
var riskyWords = map[string]bool{
	"write": true, "delete": true, "remove": true, "drop": true,
	"exec": true, "execute": true, "run": true, "command": true, "shell": true,
	"send": true, "pay": true, "purchase": true, "transfer": true,
}

// mutatingWords are name words of tools that change something. They require approval when the
// tool's MCP annotations also say it is not read-only.
var mutatingWords = map[string]bool{
	"create": true, "edit": true, "update": true, "modify": true, "move": true, "rename": true,
	"copy": true, "set": true, "put": true, "post": true, "patch": true, "upload": true,
	"save": true, "insert": true, "append": true, "replace": true, "overwrite": true,
	"mkdir": true, "kill": true, "deploy": true, "install": true, "commit": true, "push": true,
}

// approvalPolicy decides which tools are never executed without a recorded approval.
type approvalPolicy struct {
	require map[string]bool
	exempt  map[string]bool
}

// newApprovalPolicy builds the policy from the configured name lists; a name in both is an
// error.
func newApprovalPolicy(require, exempt []string) (approvalPolicy, error) {
	p := approvalPolicy{require: make(map[string]bool), exempt: make(map[string]bool)}
	for _, name := range require {
		p.require[name] = true
	}
	for _, name := range exempt {
		if p.require[name] {
			return approvalPolicy{}, fmt.Errorf("tool %q is listed both as requiring approval and as exempt from it", name)
		}
		p.exempt[name] = true
	}
	return p, nil
}

// requires reports whether the tool needs approval: names exempted by configuration never do;
// otherwise the tool's own flag, a configured name or a risky word in the name makes it so.
func (p approvalPolicy) requires(name string, flagged bool) bool {
	if p.exempt[name] {
		return false
	}
	return flagged || p.require[name] || hasWord(name, riskyWords)
}

// annotationsRequireApproval reports whether an MCP tool's annotations make it need approval:
// a tool that is not read-only and does not say it is not destructive (the MCP specification's
// destructiveHint defaults to true: a client assumes a tool that may write may destroy), or
// whose name says it changes something. Tools without annotations are judged by their name
// alone.
func annotationsRequireApproval(name string, a *mcp.Annotations) bool {
	if a == nil || a.ReadOnly {
		return false
	}
	return a.Destructive == nil || *a.Destructive || hasWord(name, mutatingWords)
}

// hasWord reports whether a word of name is in words. Words are split on _ - . and at
// lower-to-upper case changes, so "fs__write_file", "send-email" and "writeFile" all have
// their verbs found.
func hasWord(name string, words map[string]bool) bool {
	for _, w := range nameWords(name) {
		if words[w] {
			return true
		}
	}
	return false
}

// nameWords splits a tool name into lower-case words.
func nameWords(name string) []string {
	var words []string
	var cur strings.Builder
	prevLower := false
	flush := func() {
		if cur.Len() > 0 {
			words = append(words, strings.ToLower(cur.String()))
			cur.Reset()
		}
	}
	for _, r := range name {
		switch {
		case r == '_' || r == '-' || r == '.':
			flush()
			prevLower = false
			continue
		case unicode.IsUpper(r) && prevLower:
			flush()
		}
		cur.WriteRune(r)
		prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
	}
	flush()
	return words
}
