package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// parametersPrefix starts placeholders filled at run time by REST tools: never expanded, and
// kept only under restToolsKey, since nothing else fills them in.
const parametersPrefix = "parameters."

// restToolsKey is the section of the REST tools, whose values keep ${parameters.x}.
const restToolsKey = "rest_tools"

// lookupFunc returns the value of a variable and whether it is set.
type lookupFunc func(name string) (string, bool)

// expandTree expands ${VAR} in every scalar value below n, in place, except under
// mcp_servers.*.env and mcp_servers.*.headers. path is n's key path. It returns every problem.
func expandTree(n *yaml.Node, path []string, lookup lookupFunc) []error {
	if protected(path) {
		return nil
	}
	var errs []error
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			errs = append(errs, expandTree(n.Content[i+1], append(path, n.Content[i].Value), lookup)...)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			errs = append(errs, expandTree(c, append(path, "["+strconv.Itoa(i)+"]"), lookup)...)
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$") {
			return nil
		}
		v, err := expandString(n.Value, lookup, len(path) > 0 && path[0] == restToolsKey)
		if err != nil {
			var missing *MissingVariableError
			if errors.As(err, &missing) {
				missing.Key = keyPath(path)
				return []error{missing}
			}
			return []error{fmt.Errorf("%s: %w", keyPath(path), err)}
		}
		if v != n.Value {
			n.Value = v
			// Let YAML resolve the expanded text again (a plain "${PORT}" may be a number);
			// quoted scalars stay strings. An empty value stays the empty string: resolved, it
			// would be null, which a layer's merge takes for no value and skips, so a variable
			// set empty could not override a lower layer.
			n.Tag = ""
			if v == "" {
				n.Tag = "!!str"
			}
		}
	}
	return errs
}

// protected reports whether values at path are passed on as written: everything under
// mcp_servers.<name>.env and mcp_servers.<name>.headers.
func protected(path []string) bool {
	return len(path) >= 3 && path[0] == "mcp_servers" && (path[2] == "env" || path[2] == "headers")
}

// keyPath joins a key path for messages: providers.local.api_key, mcp_servers.fs.args[1].
func keyPath(path []string) string {
	var b strings.Builder
	for i, p := range path {
		if i > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// expandString replaces every ${VAR} in s by its value. ${parameters.*} stays as written when
// keepParameters (a REST tool's value) and is an error elsewhere, and $${X} becomes a literal
// ${X}. An unset variable is a *MissingVariableError (without Key).
func expandString(s string, lookup lookupFunc, keepParameters bool) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			b.WriteString("${")
			i += len("$${")
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated ${ in %q", s)
			}
			ref, name := s[i:i+end+1], s[i+2:i+end]
			i += end + 1
			if strings.HasPrefix(name, parametersPrefix) {
				if !keepParameters {
					return "", fmt.Errorf("%s is a REST tool's placeholder, filled in only under %s (write $%s for the text itself)",
						ref, restToolsKey, ref)
				}
				b.WriteString(ref)
				continue
			}
			if !validVarName(name) {
				return "", fmt.Errorf("invalid variable reference %q: names use letters, digits and '_' (write $${ for a literal ${)", ref)
			}
			v, ok := lookup(name)
			if !ok {
				return "", &MissingVariableError{Variable: name}
			}
			b.WriteString(v)
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), nil
}
