package grant

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A user assertion is the orchestrator's signed word about the user a call acts for. The
// orchestrator alone sees the credentials of a public API caller, so only it can say which user
// a run is for; the stages it calls (context assembly, the action stage) forward the user to
// the memory stage with the assertion beside it, and the memory stage, which keeps every
// user's memories apart, believes such a stage about the user only with an assertion for that
// user (README, "Memory isolation"). It is signed with the key of approval grants, which the
// orchestrator already holds.
//
// The token is hand-written rather than a JWT: the module has no JWT dependency, and one
// algorithm over one fixed layout leaves nothing to negotiate ("alg": "none", key confusion).
// It is the base64url (unpadded) of the signed text, a dot, and the base64url of the Ed25519
// signature of that text. The signed text is four lines, in this order:
//
//	agentmesh user assertion v1
//	<key id, KeyID of the public key>
//	<expiry, Unix seconds>
//	<user id, the rest of the text, newlines included>
//
// Its first line keeps a signature over it from ever standing for an approval grant's (whose
// signed bytes are a protobuf encoding), and the user last leaves no way to read the text two
// ways. It binds no run: the memory stage's requests name none to hold it to.
const userAssertionHeader = "agentmesh user assertion v1"

// UserAssertionLifetime is how long a user assertion the orchestrator mints is valid. The
// orchestrator keeps a run's assertion and mints another only when a call would start with
// less than half of it left (or less than the call may take), so that a run signs one an hour
// at most, however many turns it has, and a run that waits for approval for days gets a fresh
// one when it goes on. An assertion that leaks is good for its user only, for this long.
const UserAssertionLifetime = time.Hour

// SignUser returns a user assertion that the calls carrying it act for user, valid until
// expires (to the second, rounded down).
func (s *Signer) SignUser(user string, expires time.Time) string {
	msg := userAssertionText(s.id, expires.Unix(), user)
	sig := ed25519.Sign(s.key, msg)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(msg) + "." + enc.EncodeToString(sig)
}

// VerifyUser returns nil when token is a user assertion one of this verifier's keys signed
// for exactly user and now is before its expiry, and an error wrapping ErrInvalid that says
// why not otherwise.
func (v *Verifier) VerifyUser(token, user string, now time.Time) error {
	invalid := func(why string, a ...any) error {
		return fmt.Errorf("%w: user assertion: %s", ErrInvalid, fmt.Sprintf(why, a...))
	}
	text, sig, found := strings.Cut(token, ".")
	if !found {
		return invalid("not two base64url parts joined by a dot")
	}
	msg, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil {
		return invalid("its text is not base64url: %v", err)
	}
	rawSig, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return invalid("its signature is not base64url: %v", err)
	}
	lines := bytes.SplitN(msg, []byte("\n"), 4)
	if len(lines) != 4 || string(lines[0]) != userAssertionHeader {
		return invalid("not an %q", userAssertionHeader)
	}
	key, err := v.key(string(lines[1]))
	if err != nil {
		return invalid("%v", err)
	}
	if !ed25519.Verify(key, msg, rawSig) {
		return invalid("the signature does not verify")
	}
	expires, err := strconv.ParseInt(string(lines[2]), 10, 64)
	if err != nil {
		return invalid("its expiry is not Unix seconds: %v", err)
	}
	switch asserted := string(lines[3]); {
	case asserted != user:
		return invalid("asserts user %q, not %q", asserted, user)
	case now.Unix() >= expires:
		return invalid("expired at %s", time.Unix(expires, 0).UTC().Format(time.RFC3339))
	}
	return nil
}

// userAssertionText is the text a user assertion signs.
func userAssertionText(keyID string, expires int64, user string) []byte {
	return fmt.Appendf(nil, "%s\n%s\n%d\n%s", userAssertionHeader, keyID, expires, user)
}
