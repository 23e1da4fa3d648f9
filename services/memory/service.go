// Package memory implements the MemoryService: per-user memories with lexical (BM25) search,
// run transcripts that must continue their hash chain, and stored run results.
//
// Storage is behind the Store interface; NewMemoryStore is the in-process implementation.
// Every memory RPC is scoped to the request's user_id: a user never sees, finds or deletes
// another user's memories.
package memory

import (
	"context"
	"errors"
	"log/slog"
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc"
)

// Defaults and limits of the service.
const (
	// DefaultQuotaPerUser is the number of memories a user may hold when Options.QuotaPerUser is 0.
	DefaultQuotaPerUser = 10000
	// DefaultSearchLimit is the number of hits of a Search whose limit is 0.
	DefaultSearchLimit = 5
	// MaxSearchLimit caps the limit of a Search.
	MaxSearchLimit = 100
	// DefaultPageSize is the page size of a List whose page_size is 0.
	DefaultPageSize = 50
	// MaxPageSize caps the page size of a List.
	MaxPageSize = 500
)

// Options configures the service.
type Options struct {
	// Store holds the data; nil means a new in-memory store.
	Store Store
	// QuotaPerUser is how many memories one user may hold; 0 means DefaultQuotaPerUser.
	QuotaPerUser int
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Service implements memoryv1.MemoryServiceServer.
type Service struct {
	memoryv1.UnimplementedMemoryServiceServer
	store Store
	quota int
	now   func() time.Time
	log   *slog.Logger
}

// New returns a Service configured by opts.
func New(opts Options) *Service {
	if opts.Store == nil {
		opts.Store = NewMemoryStore()
	}
	if opts.QuotaPerUser <= 0 {
		opts.QuotaPerUser = DefaultQuotaPerUser
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Service{
		store: opts.Store,
		quota: opts.QuotaPerUser,
		now:   opts.Now,
		log:   slog.Default().With("service", "memory"),
	}
}

// Register registers the service on g.
func (s *Service) Register(g *grpc.Server) {
	memoryv1.RegisterMemoryServiceServer(g, s)
}

// storeError turns an error of the Store into the error the RPC returns: stage errors and
// context errors pass through, anything else is a STORAGE_ERROR.
func (s *Service) storeError(ctx context.Context, op string, err error) error {
	if stageerr.As(err) != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	s.log.ErrorContext(ctx, "store failed", "op", op, "error", err)
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_STORAGE_ERROR, "%s: %w", op, err)
}
