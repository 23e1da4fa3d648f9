package auth_test

import (
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/auth"
)

// TestNewRefusesAKeyOfAUserIDOverTheLimit: a key whose tenant/user is over auth.MaxIDBytes
// would start runs that every stage refuses halfway (a user id is at most 256 bytes
// everywhere), so the configuration is refused, naming the key; one at the limit is taken.
func TestNewRefusesAKeyOfAUserIDOverTheLimit(t *testing.T) {
	_, hash := auth.NewKey()
	key := func(tenant, user string) []auth.Key {
		return []auth.Key{{Hash: hash, Principal: auth.Principal{Tenant: tenant, User: user}}}
	}
	if _, err := auth.New(key("acme", strings.Repeat("u", auth.MaxIDBytes-len("acme/"))), nil); err != nil {
		t.Errorf("a key of a user id of %d bytes: %v", auth.MaxIDBytes, err)
	}
	_, err := auth.New(key("acme", strings.Repeat("u", auth.MaxIDBytes)), nil)
	if err == nil || !strings.Contains(err.Error(), "api_keys[0]: tenant/user is 261 bytes; at most 256") {
		t.Errorf("a key of a user id of 261 bytes: %v, want an error naming api_keys[0] and the limit", err)
	}
}
