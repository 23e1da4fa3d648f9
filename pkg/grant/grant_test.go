package grant_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	"github.com/agentmesh/agentmesh/pkg/grant"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestVerify(t *testing.T) {
	dir := t.TempDir()
	pub, priv := grant.GenerateKey()
	if err := grant.WriteKeys(filepath.Join(dir, "grant.key"), filepath.Join(dir, "grant.pub"), pub, priv); err != nil {
		t.Fatal(err)
	}
	signer, err := grant.LoadSigner(filepath.Join(dir, "grant.key"))
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := grant.LoadVerifier(filepath.Join(dir, "grant.pub"))
	if err != nil {
		t.Fatal(err)
	}
	_, otherPriv := grant.GenerateKey()
	now := time.Now()
	args := mustStruct(t, map[string]any{"amount": 100, "to": "bob"})
	good, err := signer.Sign("run-1", "call-1", "pay", args, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := grant.NewSigner(otherPriv).Sign("run-1", "call-1", "pay", args, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	tampered := proto.CloneOf(good)
	tampered.ToolName = "delete_everything"

	for _, tc := range []struct {
		name        string
		g           *actionv1.ApprovalGrant
		run, call   string
		tool        string
		args        *structpb.Struct
		at          time.Time
		wantInvalid bool
	}{
		{"valid", good, "run-1", "call-1", "pay", args, now, false},
		{"none", nil, "run-1", "call-1", "pay", args, now, true},
		{"forged with another key", foreign, "run-1", "call-1", "pay", args, now, true},
		{"edited after signing", tampered, "run-1", "call-1", "delete_everything", args, now, true},
		{"replayed for another call", good, "run-1", "call-2", "pay", args, now, true},
		{"replayed in another run", good, "run-2", "call-1", "pay", args, now, true},
		{"for another tool", good, "run-1", "call-1", "refund", args, now, true},
		{"for other arguments", good, "run-1", "call-1", "pay", mustStruct(t, map[string]any{"amount": 1e6, "to": "bob"}), now, true},
		{"expired", good, "run-1", "call-1", "pay", args, now.Add(time.Minute), true},
	} {
		err := verifier.Verify(tc.g, tc.run, tc.call, tc.tool, tc.args, tc.at)
		if got := errors.Is(err, grant.ErrInvalid); got != tc.wantInvalid || (err != nil && !got) {
			t.Errorf("%s: Verify = %v, want invalid %v", tc.name, err, tc.wantInvalid)
		}
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
