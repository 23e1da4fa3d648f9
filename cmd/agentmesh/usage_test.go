package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestUsageListsEveryFlag: the top-level usage names each flag that a command's -h lists, so
// that `agentmesh help` does not leave out what a command takes (it left out run's --profile,
// --user and --max-turns), and so does the README (it left out dev's -v): in code that begins
// with the flag (`--data DIR`) or that shows the command with it (`agentmesh watch RUN_ID
// --from SEQ`).
func TestUsageListsEveryFlag(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(string(readme), -1)
	isolate(t)
	flagName := regexp.MustCompile(`(?m)^  -([a-z-]+)`)
	for _, cmd := range [][]string{{"dev"}, {"run"}, {"tools"}, {"get"}, {"watch"}, {"approve"}, {"answer"}, {"cancel"},
		{"memories"}, {"transcript", "verify"}, {"keys", "new"}, {"certs"}, {"conformance"}, {"ingest"}} {
		name := strings.Join(cmd, " ")
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(t.Context(), append(cmd, "-h"), &stdout, &stderr); code != 0 {
				t.Fatalf("agentmesh %s -h: exit %d: %s", name, code, stderr.String())
			}
			// The command's entry: its line and the indented lines that continue it.
			var entry []string
		scan:
			for l := range strings.SplitSeq(usage, "\n") {
				switch {
				case strings.HasPrefix(l, "  agentmesh "+name+" "):
					entry = append(entry, l)
				case len(entry) > 0 && strings.HasPrefix(l, "   "):
					entry = append(entry, l)
				case len(entry) > 0:
					break scan
				}
			}
			if len(entry) == 0 {
				t.Fatalf("the usage has no line for %s", name)
			}
			text := strings.Join(entry, "\n")
			for _, m := range flagName.FindAllStringSubmatch(stdout.String(), -1) {
				pattern := regexp.MustCompile(`(^|[ \[|])--?` + regexp.QuoteMeta(m[1]) + `\b`)
				if !pattern.MatchString(text) {
					t.Errorf("the usage's entry %q leaves out --%s", text, m[1])
				}
				if !slices.ContainsFunc(code, func(c []string) bool {
					at := pattern.FindStringIndex(c[1])
					return at != nil && (at[0] == 0 || strings.Contains(c[1], "agentmesh "+name))
				}) {
					t.Errorf("README.md names no flag --%s of agentmesh %s", m[1], name)
				}
			}
		})
	}
}
