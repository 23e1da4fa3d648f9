// Package grant signs and verifies approval grants: the orchestrator's Ed25519-signed proof,
// which the action stage checks, that a person, whom it names, approved one tool call with
// exactly these arguments. The action stage never trusts an "approved" flag in a request; only the
// orchestrator holds the private key, so only it can make a grant. With the same key the
// orchestrator signs user assertions (SignUser), which the memory stage checks: its word about
// the user the calls of a run act for.
package grant

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Signer makes grants with the orchestrator's private key.
type Signer struct {
	key ed25519.PrivateKey
	id  string
}

// NewSigner returns a Signer of key.
func NewSigner(key ed25519.PrivateKey) *Signer {
	return &Signer{key: key, id: KeyID(key.Public().(ed25519.PublicKey))}
}

// Call is what a grant is for: one call of a run, of one tool with these arguments, acting for
// one user, and who approved it.
type Call struct {
	// RunID is the run.
	RunID string
	// CallID is the call within the run.
	CallID string
	// Tool is the tool's name.
	Tool string
	// Arguments are the call's arguments.
	Arguments *structpb.Struct
	// Approver is the principal who approved the call (actionv1.Approval's approver).
	Approver string
	// User is the user the call acts for (the run's user; empty for a call that acts for none).
	User string
}

// Sign returns the grant of call c, approved until expires.
func (s *Signer) Sign(c Call, expires time.Time) (*actionv1.ApprovalGrant, error) {
	sum, err := argumentsSum(c.Arguments)
	if err != nil {
		return nil, err
	}
	g := &actionv1.ApprovalGrant{
		RunId: c.RunID, CallId: c.CallID, ToolName: c.Tool, ArgumentsSha256: sum,
		ExpiresAt: timestamppb.New(expires), KeyId: s.id, Approver: c.Approver, UserId: c.User,
	}
	msg, err := signedBytes(g)
	if err != nil {
		return nil, err
	}
	g.Signature = ed25519.Sign(s.key, msg)
	return g, nil
}

// Verifier checks grants with the orchestrator's public keys: the one it signs with, and
// while a key is rotated, the one it signed with before (see LoadVerifier).
type Verifier struct {
	keys map[string]ed25519.PublicKey // by KeyID
	ids  string                       // the keys' ids, quoted and comma-separated, for errors
}

// NewVerifier returns a Verifier of keys.
func NewVerifier(keys ...ed25519.PublicKey) *Verifier {
	v := &Verifier{keys: make(map[string]ed25519.PublicKey, len(keys))}
	ids := make([]string, 0, len(keys))
	for _, k := range keys {
		id := KeyID(k)
		if _, dup := v.keys[id]; !dup {
			v.keys[id] = k
			ids = append(ids, strconv.Quote(id))
		}
	}
	v.ids = strings.Join(ids, ", ")
	return v
}

// key returns the public key of id, or an error that says the verifier has none.
func (v *Verifier) key(id string) (ed25519.PublicKey, error) {
	if k, ok := v.keys[id]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("signed with key %q, not an orchestrator key (%s)", id, v.ids)
}

// ErrInvalid is the error of every grant that does not verify; the wrapped message says why.
var ErrInvalid = errors.New("invalid approval grant")

// Verify returns nil when g is a grant one of this verifier's keys signed for exactly call c
// (run, call id, tool, arguments, user and approver) and now is before its expiry, and an
// error wrapping ErrInvalid that says why not otherwise. A grant that signs no approver, made by an
// orchestrator from before grants signed it (during a rolling upgrade), verifies for any
// approver and any user c names: its approver is then unknown (the grant's, empty), never c's.
// Every other grant verifies only for the user it signs, empty for a call that acts for none.
func (v *Verifier) Verify(g *actionv1.ApprovalGrant, c Call, now time.Time) error {
	invalid := func(why string, a ...any) error { return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(why, a...)) }
	switch {
	case g == nil:
		return invalid("the call carries no grant")
	}
	key, err := v.key(g.GetKeyId())
	if err != nil {
		return invalid("%v", err)
	}
	msg, err := signedBytes(g)
	if err != nil {
		return invalid("%v", err)
	}
	if !ed25519.Verify(key, msg, g.GetSignature()) {
		return invalid("the signature does not verify")
	}
	sum, err := argumentsSum(c.Arguments)
	if err != nil {
		return invalid("%v", err)
	}
	switch {
	case g.GetRunId() != c.RunID || g.GetCallId() != c.CallID:
		return invalid("granted for call %q of run %q, not call %q of run %q",
			g.GetCallId(), g.GetRunId(), c.CallID, c.RunID)
	case g.GetToolName() != c.Tool:
		return invalid("granted for tool %q, not %q", g.GetToolName(), c.Tool)
	case string(g.GetArgumentsSha256()) != string(sum):
		return invalid("granted for other arguments")
	case g.GetApprover() != "" && g.GetApprover() != c.Approver:
		return invalid("approved by %q, not %q", g.GetApprover(), c.Approver)
	case g.GetApprover() != "" && g.GetUserId() != c.User:
		return invalid("granted for user %q, not %q", g.GetUserId(), c.User)
	case !now.Before(g.GetExpiresAt().AsTime()):
		return invalid("expired at %s", g.GetExpiresAt().AsTime().Format(time.RFC3339))
	}
	return nil
}

// KeyID names a public key: the hex of the first 8 bytes of its SHA-256.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// argumentsSum is the SHA-256 of the deterministic protobuf encoding of args.
func argumentsSum(args *structpb.Struct) ([]byte, error) {
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("encoding the arguments: %w", err)
	}
	sum := sha256.Sum256(raw)
	return sum[:], nil
}

// signedBytes is what the signature covers: the grant's deterministic encoding without the
// signature.
func signedBytes(g *actionv1.ApprovalGrant) ([]byte, error) {
	unsigned := proto.CloneOf(g)
	unsigned.Signature = nil
	return proto.MarshalOptions{Deterministic: true}.Marshal(unsigned)
}
