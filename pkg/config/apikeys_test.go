package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/auth"
)

// TestAPIKeysFileIsValidated: auth.api_keys_file is not set beside auth.api_keys, and must
// name a file whose api_keys take the form of auth.api_keys and pass their rules, which the
// orchestrator's authenticator reads (the other services need not mount it); each problem is
// an error naming the key. A file that is right turns auth on.
func TestAPIKeysFileIsValidated(t *testing.T) {
	_, hash := auth.NewKey()
	dir := t.TempDir()
	file := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := file("good.yaml", "api_keys:\n  - {hash: \""+hash+"\", tenant: acme, user: alice}\n")
	for _, tc := range []struct {
		name string
		auth Auth
		want string // "" when valid
	}{
		{"a file of keys", Auth{APIKeysFile: good}, ""},
		{"no such file", Auth{APIKeysFile: filepath.Join(dir, "missing.yaml")},
			"api_keys_file: open "},
		{"a field the file does not have", Auth{APIKeysFile: file("typo.yaml",
			"api_keys:\n  - {hash: \""+hash+"\", usr: alice}\n")}, "field usr not found"},
		{"an entry that breaks the rules", Auth{APIKeysFile: file("nouser.yaml",
			"api_keys:\n  - {hash: \""+hash+"\"}\n")}, "api_keys[0].user: must be set"},
		{"beside api_keys", Auth{APIKeysFile: good, APIKeys: []APIKey{{Hash: hash, User: "bob"}}},
			"auth.api_keys and auth.api_keys_file: keep the keys in one of them, not both"},
	} {
		c := Default()
		c.Auth = tc.auth
		err := c.Validate()
		if err == nil {
			_, err = c.Auth.Authenticator()
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: Validate() = %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: Validate() = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if !(Auth{APIKeysFile: good}).Enabled() {
		t.Error("auth with api_keys_file alone is not enabled")
	}
}
