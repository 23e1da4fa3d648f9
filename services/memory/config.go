package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/grant"
	"github.com/agentmesh/agentmesh/pkg/server"
)

// OptionsFromConfig builds the service's options from the configuration's memory section,
// opening the store it names: memory (in process), sqlite (the file memory.path) or postgres
// (memory.dsn, with at most memory.postgres_max_conns connections), either re-indexing the
// memories an earlier release indexed every memory.reindex_interval_ms (WithReindexInterval). A
// quota_per_user of 0 means no quota, a search_cache of 0 entries no cache.
// Memory isolation is enforced (Options.RequireUser) when the configuration authenticates the
// public API (auth.*), and callers are identified by their mesh certificates
// (Options.MeshIdentity) when the services talk mutual TLS (tls.ca), which serves the
// memory.callers only (Options.Callers), and believes a caller other than the orchestrator
// about the user only with the orchestrator's assertion of it, checked with the public key of
// approval grants (approvals.verify_key, Options.UserAssertions; a key that cannot be read is
// exitcode.Invalid). The store belongs to the
// Service built from the options: Service.Close closes it. An unknown store, and a memory.dsn
// that cannot be parsed (a *DSNError), are exitcode.Invalid errors naming the key: no wait
// mends them; a store that cannot be opened is exitcode.Unavailable, except a postgres database
// that does not answer: the store waits for it, not Serving meanwhile (OpenPostgres).
//
// The options have no Embedder and no Facts model: when EmbeddingTarget returns a target, set
// Options.Embedder to a GenerationEmbedder for it, and when FactsTarget returns one, set
// Options.Facts to an ask.Model for it.
func OptionsFromConfig(ctx context.Context, cfg *config.Config) (Options, error) {
	opts := Options{QuotaPerUser: cfg.Memory.QuotaPerUser, RequireUser: cfg.Auth.Enabled(),
		SearchCacheSize: cfg.Memory.SearchCache.Entries,
		SearchCacheTTL:  time.Duration(cfg.Memory.SearchCache.TTLMS) * time.Millisecond}
	if opts.SearchCacheSize == 0 {
		opts.SearchCacheSize = -1 // memory.search_cache.entries 0: off
	}
	if cfg.TLS.CA != "" {
		opts.MeshIdentity, opts.Callers = auth.MeshIdentity, cfg.Memory.Callers
		if path := cfg.Approvals.VerifyKey; path != "" {
			var err error
			if opts.UserAssertions, err = grant.LoadVerifier(path); err != nil {
				return Options{}, exitcode.Wrap(exitcode.Invalid,
					fmt.Errorf("approvals.verify_key: %w", err))
			}
		}
	}
	if opts.QuotaPerUser == 0 {
		opts.QuotaPerUser = math.MaxInt
	}
	var err error
	reindex := WithReindexInterval(time.Duration(cfg.Memory.ReindexIntervalMS) * time.Millisecond)
	switch cfg.Memory.Store {
	case "", config.StoreMemory:
		keep := cfg.Memory.KeepRuns
		opts.Store = NewMemoryStoreKeeping(Retention{MaxRuns: keep.MaxRuns, MaxAge: time.Duration(keep.MaxAgeMS) * time.Millisecond})
	case config.StoreSQLite:
		opts.Store, err = OpenSQLite(ctx, cfg.Memory.Path, reindex)
	case config.StorePostgres:
		opts.Store, err = OpenPostgres(ctx, cfg.Memory.DSN, cfg.Memory.PostgresMaxConns, reindex)
	default:
		return Options{}, exitcode.Wrap(exitcode.Invalid, fmt.Errorf("memory.store %q is not supported (use %q, %q or %q)",
			cfg.Memory.Store, config.StoreMemory, config.StoreSQLite, config.StorePostgres))
	}
	if dsn := (*DSNError)(nil); errors.As(err, &dsn) {
		return Options{}, exitcode.Wrap(exitcode.Invalid, fmt.Errorf("memory.dsn: %w", dsn.Err))
	}
	if err != nil {
		return Options{}, exitcode.Wrap(exitcode.Unavailable, err)
	}
	return opts, nil
}

// EmbeddingTarget returns the provider/model of memory.embeddings, the GenerationEmbedder's
// Target; nil when the configuration leaves semantic search off.
func EmbeddingTarget(cfg *config.Config) *typev1.Target {
	e := cfg.Memory.Embeddings
	if e == nil {
		return nil
	}
	return &typev1.Target{Provider: e.Provider, Model: e.Model}
}

// FactsTarget returns the provider/model of models.memory, the model that picks the facts of
// finished runs; nil when it is unset or names a provider of type rules, whose deterministic
// rules the memory stage applies itself.
func FactsTarget(cfg *config.Config) *typev1.Target {
	m := cfg.StageModel(cfg.Models.Memory)
	if m == nil {
		return nil
	}
	return &typev1.Target{Provider: m.Provider, Model: m.Model}
}

// DrainTimeout is how long a stopping memory stage that asks the generation stage while it
// learns from finished runs, for a model that picks their facts (models.memory, FactsTarget) or
// for the facts' embeddings (memory.embeddings, EmbeddingTarget), lets the learning in flight
// finish (Drain, then its calls, each for up to this long: pkg/server.WithDrainTimeout): the
// answers may take LearnTimeout, and server.DrainMargin to record them. Cut off sooner, a
// model's facts are picked again, and the model asked (and paid) again, by the next learner;
// facts whose embedding is cut off are stored without their vectors, for ever found by their
// words only. ok is false with neither: the rules learn at once, and the default drain is
// enough.
func DrainTimeout(cfg *config.Config) (d time.Duration, ok bool) {
	return server.DrainFor(LearnTimeout), FactsTarget(cfg) != nil || EmbeddingTarget(cfg) != nil
}
