package mesh_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/config"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestAKeyTakenOutOfTheKeysFileIsRevoked: with auth.api_keys_file, the public API takes the
// keys of the file, and a key taken out of it is refused (UNAUTHENTICATED) within
// auth.ReloadInterval, without a restart, while a key added to it is taken. API keys used to
// be read once at start: revoking a leaked key meant restarting every orchestrator replica.
func TestAKeyTakenOutOfTheKeysFileIsRevoked(t *testing.T) {
	t.Parallel()
	leaked, leakedHash := auth.NewKey()
	kept, keptHash := auth.NewKey()
	file := filepath.Join(t.TempDir(), "api-keys.yaml")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	entry := func(hash, user string) string {
		return fmt.Sprintf("  - {hash: %q, tenant: acme, user: %s}\n", hash, user)
	}
	write("api_keys:\n" + entry(leakedHash, "alice"))
	cfg := config.Default()
	cfg.Auth.APIKeysFile = file
	h := start(t, cfg)
	addr := h.mesh.Addr("orchestrator")
	code := func(key string) codes.Code {
		_, err := keyClient(t, addr, key).ListTools(t.Context(), &agentv1.ListToolsRequest{})
		return status.Code(err)
	}
	if got := code(leaked); got != codes.OK {
		t.Fatalf("a key of the file: %v, want it taken", got)
	}
	if got := code(kept); got != codes.Unauthenticated {
		t.Fatalf("a key not in the file yet: %v, want UNAUTHENTICATED", got)
	}

	write("api_keys:\n" + entry(keptHash, "bob"))
	if !eventually(t, 3*auth.ReloadInterval, func() bool {
		return code(leaked) == codes.Unauthenticated
	}) {
		t.Fatalf("the key taken out of the file is still taken after %v", 3*auth.ReloadInterval)
	}
	if got := code(kept); got != codes.OK {
		t.Errorf("the key added to the file: %v, want it taken", got)
	}
}
