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
// single-quoted (taken literally) or bare (a " #" starts a comment). A missing file holds
// no variables.
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
	value = strings.TrimSpace(value)
	switch {
	case strings.HasPrefix(value, `"`):
		unquoted, err := strconv.Unquote(value)
		if err != nil {
			return "", "", fmt.Errorf("variable %s: malformed double-quoted value", key)
		}
		return key, unquoted, nil
	case strings.HasPrefix(value, "'"):
		if len(value) < 2 || !strings.HasSuffix(value, "'") {
			return "", "", fmt.Errorf("variable %s: unterminated single-quoted value", key)
		}
		return key, value[1 : len(value)-1], nil
	}
	if i := strings.Index(value, " #"); i >= 0 {
		value = strings.TrimSpace(value[:i])
	}
	return key, value, nil
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
