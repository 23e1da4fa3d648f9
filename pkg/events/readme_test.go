package events

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMENamesEveryKind: the README's list of run event kinds, where it describes their
// subjects, names every kind of RunEvent, so that a kind added to the proto is documented where
// users look for it. The README named every kind but context_guard in passing, and listed none.
func TestREADMENamesEveryKind(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, list, ok := strings.Cut(string(readme), "The kinds, as `RunEvent`'s `kind` names them:")
	if !ok {
		t.Fatal("README.md lists no run event kinds (\"The kinds, as `RunEvent`'s `kind` names them:\")")
	}
	list, _, _ = strings.Cut(list, ". ") // the list ends its sentence
	fields := kindOneof.Fields()
	for i := range fields.Len() {
		if kind := string(fields.Get(i).Name()); !strings.Contains(list, "`"+kind+"`") {
			t.Errorf("README.md's list of run event kinds does not name %s", kind)
		}
	}
}
