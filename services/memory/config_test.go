package memory_test

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/grant"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/memory"
	"github.com/agentmesh/agentmesh/services/memory/storetest"
)

// serveFromConfig serves a memory service built from cfg; stop closes the service, and so
// its store.
func serveFromConfig(t *testing.T, cfg *config.Config) (c memoryv1.MemoryServiceClient, stop func()) {
	t.Helper()
	opts, err := memory.OptionsFromConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	svc := memory.New(opts)
	return memoryv1.NewMemoryServiceClient(grpctest.Serve(t, svc.Register)), func() {
		if err := svc.Close(); err != nil {
			t.Errorf("close the service: %v", err)
		}
	}
}

// The service's data survives a restart: stop it, build it again from the same
// configuration, and everything is still there.
func TestOptionsFromConfigRestart(t *testing.T) {
	table := []struct {
		name string
		set  func(t *testing.T, m *config.Memory)
	}{
		{"sqlite", func(t *testing.T, m *config.Memory) {
			m.Store, m.Path = config.StoreSQLite, filepath.Join(t.TempDir(), "memory.db")
		}},
		{"postgres", func(t *testing.T, m *config.Memory) {
			m.Store, m.DSN = config.StorePostgres, storetest.PostgresDSN(t)
		}},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Memory.QuotaPerUser = 2
			tc.set(t, &cfg.Memory)

			c, stop := serveFromConfig(t, cfg)
			id := store(t, c, "alice", "", "My favourite editor is Helix")
			store(t, c, "alice", "knowledge", "Helix is a modal editor")
			stop()

			c, stop = serveFromConfig(t, cfg)
			defer stop()
			resp, err := c.Search(t.Context(), &memoryv1.SearchRequest{UserId: "alice", Query: "favourite editor"})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.GetHits()) != 1 || resp.GetHits()[0].GetMemory().GetId() != id {
				t.Errorf("after restart: hits %v", resp.GetHits())
			}
			_, err = c.Store(t.Context(), &memoryv1.StoreRequest{UserId: "alice", Content: user("one too many")})
			if !strings.Contains(err.Error(), "2 of 2 memories") {
				t.Errorf("store over the quota after restart: %v", err)
			}
		})
	}
}

func TestOptionsFromConfig(t *testing.T) {
	t.Run("memory store, quota 0 is unlimited", func(t *testing.T) {
		cfg := config.Default()
		cfg.Memory.QuotaPerUser = 0
		opts, err := memory.OptionsFromConfig(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := opts.Store.(*memory.MemoryStore); !ok || opts.QuotaPerUser != math.MaxInt {
			t.Errorf("store %T, quota %d", opts.Store, opts.QuotaPerUser)
		}
	})
	t.Run("search cache", func(t *testing.T) {
		cfg := config.Default()
		opts, err := memory.OptionsFromConfig(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if opts.SearchCacheSize != 1024 || opts.SearchCacheTTL != time.Minute {
			t.Errorf("search cache of %d searches for %v, want the defaults' 1024 for a minute", opts.SearchCacheSize, opts.SearchCacheTTL)
		}
		cfg.Memory.SearchCache.Entries = 0
		if opts, err = memory.OptionsFromConfig(t.Context(), cfg); err != nil || opts.SearchCacheSize >= 0 {
			t.Errorf("entries 0: search cache size %d (%v), want it off (negative)", opts.SearchCacheSize, err)
		}
	})
	t.Run("user assertions", func(t *testing.T) {
		dir := t.TempDir()
		cfg := config.Default()
		cfg.TLS.CA = filepath.Join(dir, "ca.pem") // read by the server, not OptionsFromConfig
		cfg.Approvals.VerifyKey = filepath.Join(dir, "grant.pub")
		pub, priv := grant.GenerateKey()
		err := grant.WriteKeys(filepath.Join(dir, "grant.key"), cfg.Approvals.VerifyKey, pub, priv)
		if err != nil {
			t.Fatal(err)
		}
		opts, err := memory.OptionsFromConfig(t.Context(), cfg)
		if err != nil || opts.UserAssertions == nil {
			t.Fatalf("with tls.ca and approvals.verify_key: UserAssertions %v (%v), want a verifier",
				opts.UserAssertions, err)
		}
		token := grant.NewSigner(priv).SignUser("acme/alice", time.Now().Add(time.Minute))
		if err := opts.UserAssertions.VerifyUser(token, "acme/alice", time.Now()); err != nil {
			t.Errorf("an assertion of the key pair: %v", err)
		}
		cfg.Approvals.VerifyKey = filepath.Join(dir, "missing.pub")
		_, err = memory.OptionsFromConfig(t.Context(), cfg)
		if exitcode.Of(err) != exitcode.Invalid ||
			!strings.Contains(err.Error(), "approvals.verify_key") {
			t.Errorf("a verify key that is not there: %v (exit code %d), want exit code %d naming "+
				"approvals.verify_key", err, exitcode.Of(err), exitcode.Invalid)
		}
		cfg.TLS.CA = "" // callers are not identified: the key is not read
		opts, err = memory.OptionsFromConfig(t.Context(), cfg)
		if err != nil || opts.UserAssertions != nil {
			t.Errorf("without tls.ca: UserAssertions %v (%v), want none", opts.UserAssertions, err)
		}
	})
	table := []struct {
		name string
		mem  config.Memory
		code int
		want string
	}{
		{"unknown store", config.Memory{Store: "redis"}, exitcode.Invalid, `memory.store "redis" is not supported`},
		{"sqlite file in a missing folder", config.Memory{Store: config.StoreSQLite, Path: filepath.Join(t.TempDir(), "missing", "memory.db")}, exitcode.Unavailable, "missing/memory.db"},
		{"sqlite without a path", config.Memory{Store: config.StoreSQLite}, exitcode.Unavailable, "database path is empty"},
		{"postgres with a bad DSN", config.Memory{Store: config.StorePostgres, DSN: "postgres://%zz"}, exitcode.Invalid, "memory.dsn: cannot parse"},
		{"postgres with a port out of range", config.Memory{Store: config.StorePostgres, DSN: "host=db port=99999"}, exitcode.Invalid, "memory.dsn: "},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			tc.mem.PostgresMaxConns = cfg.Memory.PostgresMaxConns
			cfg.Memory = tc.mem
			_, err := memory.OptionsFromConfig(t.Context(), cfg)
			if exitcode.Of(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v (exit code %d), want exit code %d saying %q", err, exitcode.Of(err), tc.code, tc.want)
			}
		})
	}
}

// memory.embeddings becomes the GenerationEmbedder's target; unset, semantic search is off.
func TestEmbeddingTarget(t *testing.T) {
	cfg := config.Default()
	if got := memory.EmbeddingTarget(cfg); got != nil {
		t.Errorf("EmbeddingTarget(default) = %v, want nil", got)
	}
	cfg.Memory.Embeddings = &config.Target{Provider: "rules", Model: "rules-v1"}
	if got := memory.EmbeddingTarget(cfg); got.GetProvider() != "rules" || got.GetModel() != "rules-v1" {
		t.Errorf("EmbeddingTarget = %v, want rules/rules-v1", got)
	}
}
