package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"gopkg.in/yaml.v3"
)

// TestKeysNew: `agentmesh keys new` prints a key once and the auth.api_keys entry that holds
// only its hash, which a configuration accepts; bad flags exit 4.
func TestKeysNew(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"keys", "new", "--user", "alice", "--tenant", "acme", "--role", "approver"}, &stdout, &stderr); code != 0 {
		t.Fatalf("keys new: exit %d\n%s", code, stderr.String())
	}
	out := stdout.String()
	key := regexp.MustCompile(`amk_[A-Za-z0-9_-]{43}`).FindString(out)
	if key == "" {
		t.Fatalf("no key in:\n%s", out)
	}
	var doc struct {
		Auth config.Auth `yaml:"auth"`
	}
	if err := yaml.Unmarshal([]byte(out[strings.Index(out, "auth:"):]), &doc); err != nil {
		t.Fatalf("the printed entry is not YAML: %v\n%s", err, out)
	}
	cfg := config.Default()
	cfg.Auth = doc.Auth
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the printed entry is not a valid configuration: %v", err)
	}
	entry := doc.Auth.APIKeys[0]
	if entry.Hash != auth.HashKey(key) || entry.User != "alice" || entry.Tenant != "acme" || len(entry.Roles) != 1 || strings.Count(out, key) != 1 {
		t.Errorf("entry %+v for key %s, want its hash, acme/alice, approver, and the key shown once", entry, key)
	}
	// The last: a second role given without its --role printed a key of admin alone, the
	// tenant after it dropped.
	for _, args := range [][]string{{"keys"}, {"keys", "new"}, {"keys", "new", "--user", "a/b"}, {"keys", "new", "--user", "x", "--role", "boss"},
		{"keys", "new", "--user", "bob", "--role", "admin", "approver", "--tenant", "acme"},
		// A user id of a control character: the runs of the key's principal took it as theirs,
		// where a request's user_id of one is refused.
		{"keys", "new", "--user", "a\x1b[2Jb"}, {"keys", "new", "--user", "bob", "--tenant", "ac\u009bme"}} {
		if code := run(t.Context(), args, &stdout, &stderr); code != exitcode.Invalid {
			t.Errorf("%v: exit %d, want %d", args, code, exitcode.Invalid)
		}
	}
}
