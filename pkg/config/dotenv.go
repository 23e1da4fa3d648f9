package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// readDotEnv reads a .env file: KEY=VALUE lines, optionally prefixed by "export ", with
// blank lines and # comments ignored. A value may be double-quoted (Go escapes apply),
// single-quoted (taken literally) or bare; as docker compose reads them, a '#' after a space
// or tab ends a bare value (a '#' inside it is kept), and after a closing quote only
// whitespace and a # comment may follow. A missing file holds no variables.
func readDotEnv(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	vars := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		key, value, err := parseDotEnvLine(text)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, line, err)
		}
		vars[key] = value
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return vars, nil
}

// parseDotEnvLine parses one non-blank, non-comment line of a .env file.
func parseDotEnvLine(text string) (key, value string, err error) {
	text = strings.TrimPrefix(text, "export ")
	key, value, ok := strings.Cut(text, "=")
	if !ok {
		return "", "", errors.New("expected KEY=VALUE")
	}
	key = strings.TrimSpace(key)
	if !validVarName(key) {
		return "", "", fmt.Errorf("invalid variable name %q: use letters, digits and '_'", key)
	}
	raw := value
	value = strings.TrimSpace(value)
	var rest string // what follows a quoted value's closing quote
	switch {
	case strings.HasPrefix(value, `"`):
		end := closingDoubleQuote(value)
		if end < 0 {
			return "", "", fmt.Errorf("variable %s: unterminated double-quoted value", key)
		}
		unquoted, err := strconv.Unquote(value[:end+1])
		if err != nil {
			return "", "", fmt.Errorf("variable %s: malformed double-quoted value", key)
		}
		value, rest = unquoted, value[end+1:]
	case strings.HasPrefix(value, "'"):
		end := strings.IndexByte(value[1:], '\'')
		if end < 0 {
			return "", "", fmt.Errorf("variable %s: unterminated single-quoted value", key)
		}
		value, rest = value[1:end+1], value[end+2:]
	default: // KEY=#x keeps #x; KEY= # comment is empty
		for i := 1; i < len(raw); i++ {
			if raw[i] == '#' && (raw[i-1] == ' ' || raw[i-1] == '\t') {
				return key, strings.TrimSpace(raw[:i]), nil
			}
		}
		return key, value, nil
	}
	if rest = strings.TrimSpace(rest); rest != "" && !strings.HasPrefix(rest, "#") {
		const msg = "variable %s: after the closing quote only a # comment may follow, got %q"
		return "", "", fmt.Errorf(msg, key, rest)
	}
	return key, value, nil
}

// closingDoubleQuote is the index of the quote that closes the double-quoted value that
// value begins with (a backslash escapes the character after it), or -1.
func closingDoubleQuote(value string) int {
	for i := 1; i < len(value); i++ {
		switch value[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// validVarName reports whether name is a variable name: a letter or '_', then letters,
// digits and '_'.
func validVarName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
