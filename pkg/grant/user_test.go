package grant_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/grant"
)

func TestVerifyUser(t *testing.T) {
	pub, priv := grant.GenerateKey()
	signer, verifier := grant.NewSigner(priv), grant.NewVerifier(pub)
	_, otherPriv := grant.GenerateKey()
	now := time.Now()
	expires := now.Add(grant.UserAssertionLifetime)
	good := signer.SignUser("acme/alice", expires)
	text, sig, _ := strings.Cut(good, ".")
	msg, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil {
		t.Fatal(err)
	}
	// The same signature over an edited text.
	edited := func(old, new string) string {
		return base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(msg), old, new, 1))) +
			"." + sig
	}
	otherUser := edited("acme/alice", "acme/bob")
	extended := edited("\n"+strings.Split(string(msg), "\n")[2]+"\n", "\n9999999999\n")
	foreign := grant.NewSigner(otherPriv).SignUser("acme/bob", expires)
	other := base64.RawURLEncoding.EncodeToString([]byte("hello")) + "." + sig
	newline := signer.SignUser("acme/alice\nacme/bob", expires)

	for _, tc := range []struct {
		name, token, user string
		at                time.Time
		want              string // a part of the error; "" for none
	}{
		{"valid", good, "acme/alice", now, ""},
		{"valid until just before its expiry", good, "acme/alice", expires.Add(-time.Second), ""},
		{"a user id with a newline", newline, "acme/alice\nacme/bob", now, ""},
		{"expired", good, "acme/alice", expires, "expired"},
		{"for another user", good, "acme/bob", now,
			`asserts user "acme/alice", not "acme/bob"`},
		{"for a user whose id it begins", newline, "acme/alice", now, "asserts user"},
		{"forged with another key", foreign, "acme/bob", now, "not an orchestrator key"},
		{"its user edited after signing", otherUser, "acme/bob", now, "signature does not verify"},
		{"its expiry edited after signing", extended, "acme/alice", now, "signature does not verify"},
		{"empty", "", "acme/alice", now, "two base64url parts"},
		{"not base64url", "a*b.c", "acme/alice", now, "not base64url"},
		{"its signature cut", text + "." + sig[:10], "acme/alice", now, "signature does not verify"},
		{"another kind of text", other, "acme/alice", now, "not an"},
	} {
		err := verifier.VerifyUser(tc.token, tc.user, tc.at)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: VerifyUser = %v, want nil", tc.name, err)
		case tc.want != "" &&
			(!errors.Is(err, grant.ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: VerifyUser = %v, want ErrInvalid saying %q", tc.name, err, tc.want)
		}
	}
}
