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
	call := grant.Call{RunID: "run-1", CallID: "call-1", Tool: "pay", Arguments: args,
		Approver: "acme/ann", User: "acme/alice"}
	good, err := signer.Sign(call, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := grant.NewSigner(otherPriv).Sign(call, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	unnamed, err := signer.Sign(with0(call), now.Add(time.Minute)) // an older orchestrator's
	if err != nil {
		t.Fatal(err)
	}
	stripped := proto.CloneOf(good)
	stripped.Approver = ""
	tampered := proto.CloneOf(good)
	tampered.ToolName = "delete_everything"
	otherApprover := proto.CloneOf(good)
	otherApprover.Approver = "acme/root"
	otherUser := proto.CloneOf(good)
	otherUser.UserId = "acme/bob"
	with := func(edit func(*grant.Call)) grant.Call {
		c := call
		edit(&c)
		return c
	}

	for _, tc := range []struct {
		name        string
		g           *actionv1.ApprovalGrant
		call        grant.Call
		at          time.Time
		wantInvalid bool
	}{
		{"valid", good, call, now, false},
		{"none", nil, call, now, true},
		{"forged with another key", foreign, call, now, true},
		{"edited after signing", tampered, with(func(c *grant.Call) { c.Tool = "delete_everything" }), now, true},
		{"its approver edited after signing", otherApprover, with(func(c *grant.Call) { c.Approver = "acme/root" }), now, true},
		{"replayed for another call", good, with(func(c *grant.Call) { c.CallID = "call-2" }), now, true},
		{"replayed in another run", good, with(func(c *grant.Call) { c.RunID = "run-2" }), now, true},
		{"for another tool", good, with(func(c *grant.Call) { c.Tool = "refund" }), now, true},
		{"for other arguments", good, with(func(c *grant.Call) {
			c.Arguments = mustStruct(t, map[string]any{"amount": 1e6, "to": "bob"})
		}), now, true},
		{"approved by another", good, with(func(c *grant.Call) { c.Approver = "acme/root" }), now, true},
		{"replayed for another user", good, with(func(c *grant.Call) { c.User = "acme/bob" }), now, true},
		{"replayed for no user", good, with(func(c *grant.Call) { c.User = "" }), now, true},
		{"its user edited after signing", otherUser,
			with(func(c *grant.Call) { c.User = "acme/bob" }), now, true},
		{"of an orchestrator that signed no approver, for another user", unnamed,
			with(func(c *grant.Call) { c.User = "acme/bob" }), now, false},
		{"of an orchestrator that signed no approver", unnamed, call, now, false},
		{"its approver removed after signing", stripped, call, now, true},
		{"expired", good, call, now.Add(time.Minute), true},
	} {
		err := verifier.Verify(tc.g, tc.call, tc.at)
		if got := errors.Is(err, grant.ErrInvalid); got != tc.wantInvalid || (err != nil && !got) {
			t.Errorf("%s: Verify = %v, want invalid %v", tc.name, err, tc.wantInvalid)
		}
	}
}

// with0 is c without its approver and user, as an orchestrator from before grants signed the
// approver signed c.
func with0(c grant.Call) grant.Call {
	c.Approver, c.User = "", ""
	return c
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
