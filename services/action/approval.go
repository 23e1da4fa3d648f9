package action

import (
	"fmt"
	"strings"
)

// riskyWords are the name words that make a tool require approval by default: tools that
// write, delete, run commands or spend money (DESIGN §10).
var riskyWords = map[string]bool{
	"write": true, "delete": true, "remove": true, "drop": true,
	"exec": true, "execute": true, "run": true, "command": true, "shell": true,
	"send": true, "pay": true, "purchase": true, "transfer": true,
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
	return flagged || p.require[name] || hasRiskyWord(name)
}

// hasRiskyWord reports whether a word of name (split on _ - .) is a risky word.
func hasRiskyWord(name string) bool {
	words := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool {
		return r == '_' || r == '-' || r == '.'
	})
	for _, w := range words {
		if riskyWords[w] {
			return true
		}
	}
	return false
}
