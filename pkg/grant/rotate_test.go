package grant_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/grant"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestKeyRotation: a verify_key file holding the public keys of the old signing key and the
// new one, concatenated, verifies the grants and user assertions of both, so the signing key
// can be rotated without refusing what the old key signed (a grant of a paused call, a run's
// assertion) or what the new one signs first; a third key is refused, naming the keys it
// knows. The file held one key: a new signing key made every grant fail until the verifiers
// had its key, and they then refused the old one's.
func TestKeyRotation(t *testing.T) {
	dir := t.TempDir()
	write := func(name string) (*grant.Signer, string) {
		t.Helper()
		pub, priv := grant.GenerateKey()
		privPath, pubPath := filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
		if err := grant.WriteKeys(privPath, pubPath, pub, priv); err != nil {
			t.Fatal(err)
		}
		s, err := grant.LoadSigner(privPath)
		if err != nil {
			t.Fatal(err)
		}
		return s, pubPath
	}
	old, oldPub := write("old")
	current, newPub := write("new")
	stranger, _ := write("stranger")
	both := filepath.Join(dir, "both.pub")
	var pems []byte
	for _, p := range []string{newPub, oldPub} {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		pems = append(pems, data...)
	}
	if err := os.WriteFile(both, pems, 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := grant.LoadVerifier(both)
	if err != nil {
		t.Fatal(err)
	}

	now := time.Now()
	args, _ := structpb.NewStruct(map[string]any{"to": "ops"})
	call := grant.Call{RunID: "r1", CallID: "c1", Tool: "send_mail", Arguments: args,
		Approver: "acme/ann", User: "acme/alice"}
	for name, s := range map[string]*grant.Signer{"old": old, "new": current, "stranger": stranger} {
		g, err := s.Sign(call, now.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		grantErr := v.Verify(g, call, now)
		userErr := v.VerifyUser(s.SignUser("acme/alice", now.Add(time.Hour)), "acme/alice", now)
		if name == "stranger" {
			for _, err := range []error{grantErr, userErr} {
				if err == nil || !strings.Contains(err.Error(), "not an orchestrator key") {
					t.Errorf("signed with a key the file does not hold: %v", err)
				}
			}
			continue
		}
		if grantErr != nil || userErr != nil {
			t.Errorf("signed with the %s key: grant %v, user assertion %v", name, grantErr, userErr)
		}
	}

	bad := filepath.Join(dir, "bad.pub")
	private := []byte("-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n")
	if err := os.WriteFile(bad, append(pems, private...), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = grant.LoadVerifier(bad)
	if err == nil || !strings.Contains(err.Error(), `"PRIVATE KEY" block`) {
		t.Errorf("a verify_key file with a private key: %v, want it refused", err)
	}
}
