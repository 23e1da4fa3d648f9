package auth_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"google.golang.org/grpc/metadata"
)

// TestFollowKeys: an Authenticator of a keys file takes the keys load reads from it, and reads
// them again when the file changes (here at every call): a key taken out is refused, one
// added is taken. A file that changed but does not load keeps the keys in use; one whose
// keys break New's rules does not start.
func TestFollowKeys(t *testing.T) {
	first, firstHash := auth.NewKey()
	second, secondHash := auth.NewKey()
	file := filepath.Join(t.TempDir(), "keys")
	// The file holds the hashes, one a line, of keys of user alice: load reads it as the
	// configuration's loader would, and fails on a line that is not a hash.
	load := func() ([]auth.Key, error) {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var keys []auth.Key
		for line := range strings.Lines(string(data)) {
			hash := strings.TrimSpace(line)
			if !strings.HasPrefix(hash, "sha256:") {
				return nil, errors.New("not a hash: " + hash)
			}
			keys = append(keys, auth.Key{Hash: hash, Principal: auth.Principal{User: "alice"}})
		}
		return keys, nil
	}
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(firstHash + "\n")
	a, err := auth.FollowKeys(file, 1, load, nil)
	if err != nil {
		t.Fatal(err)
	}
	takes := func(key string) bool {
		ctx := metadata.NewIncomingContext(context.Background(),
			metadata.Pairs("authorization", "Bearer "+key))
		p, err := a.Authenticate(ctx)
		return err == nil && p.User == "alice"
	}
	if !takes(first) || takes(second) {
		t.Fatalf("the file's key taken %v, another's %v; want only the file's", takes(first), takes(second))
	}
	write(secondHash + "\n")
	if takes(first) || !takes(second) {
		t.Errorf("once the file changed, the key taken out %v, the key added %v", takes(first), takes(second))
	}
	write("sha256:") // half written, or a mistake: the keys in use stay
	if !takes(second) {
		t.Error("a file that does not load dropped the keys in use")
	}

	write(firstHash + "\n" + firstHash + "\n")
	if _, err := auth.FollowKeys(file, 1, load, nil); err == nil ||
		!strings.Contains(err.Error(), "api_keys[1].hash: the same key is configured twice") {
		t.Errorf("a file naming a key twice: %v, want New's error naming the entry", err)
	}
}
