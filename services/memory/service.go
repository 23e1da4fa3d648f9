// Package memory implements the MemoryService: per-user memories with semantic or lexical
// search, run transcripts that must continue their hash chain, and stored run results.
//
// Storage is behind the Store interface, with three implementations: NewMemoryStore keeps
// everything in process memory; OpenSQLite keeps it in one SQLite file (pure Go, WAL);
// OpenPostgres keeps it in a PostgreSQL database, for deployments that outgrow one machine.
// OptionsFromConfig opens the store the configuration names.
//
// # Isolation
//
// Every memory RPC is scoped to one user: a user never sees, finds or deletes another user's
// memories. The user a call acts for travels as call metadata (auth.UserMetadata), set by the
// orchestrator and forwarded by the context and action stages, never taken from a free
// request field: a request's user_id must name that user (or be empty, and is then filled
// from it), else the call is PERMISSION_DENIED. GetRun shows a run only to a call acting for
// its owner or for a principal whose roles let it read the run (auth.Principal.May). With
// Options.RequireUser (set when the public API authenticates its callers) a call that names
// no user is refused; without it, as for `agentmesh dev`, such a call acts for its request's
// user_id. The metadata is believed from mesh services only when Options.MeshIdentity
// identifies callers (mTLS between the services), and from any caller otherwise; with
// Options.UserAssertions too, from a service other than the orchestrator only beside the
// orchestrator's assertion of that user (auth.UserAssertionMetadata).
//
// # Search
//
// Without an Embedder, Search ranks with Okapi BM25 over lowercase words (stopwords left
// out; full-width letters and digits, "２０２４", read as ASCII), k1 = 1.2, b = 0.75, within
// the user's collection; scores are divided by the best one, so the best hit scores 1 and a
// memory sharing no word with the query is no hit. The text of a script written without
// spaces between words (Chinese, Japanese, Thai, Lao, Khmer, Myanmar) counts as its
// overlapping pairs of characters, as Lucene's CJKAnalyzer does, so "東京" finds
// "私は東京に住んでいます", and a memory's as its characters too, so a query of one character
// ("猫") finds it. A SQL store records with each memory the termsVersion that indexed it, and
// indexes again, in batches, those an earlier release indexed (SQLStore.ReindexTerms): when it
// opens and then every WithReindexInterval, so that the memories a replica of an earlier
// release writes during a rolling upgrade are found too.
//
// With an Embedder (Options.Embedder: the mesh and cmd/memory set a GenerationEmbedder for
// the configuration's memory.embeddings, see EmbeddingTarget), Store embeds each memory
// and the store keeps the vector with it; Search embeds the query and scores every memory as
// SemanticWeight (0.8) × max(0, cosine similarity) + 0.2 × its normalised BM25 score, so a
// memory that shares no word with the query is still found by meaning, and exact words break
// ties. Memories stored without a vector (an embedder failure) take part through BM25 only.
// When embedding fails (a vector holding NaN or an infinity is a failure too), Store keeps the
// memory without a vector and Search ranks with BM25 alone; both log a warning saying so.
// Search's response accounts the query's embedding request (an EMBEDDING entry, ok or failed)
// for the run the search is made for.
//
// # Learning
//
// The first SaveRun of a run queues it, in the same write as the result, and a goroutine of
// the service learns from it once SaveRun has answered, so a run's result never waits for it:
// it picks the facts of the conversation worth remembering, each with an importance in [0, 1],
// by Options.Facts (the model of models.memory, asked for FactsSchema through the generation
// service) or, without one, and whenever the model fails or answers outside the schema, by the
// deterministic rules of ruleFacts. Each fact is stored in the run's user's personal memory
// (embedded, with an Embedder), where later runs' searches find it, unless a memory already
// holds it (Store.DuplicateMemory: the same words, or an embedding at least
// DuplicateSimilarity alike). What learning did — the memories stored, the duplicates, who
// picked the facts and why the rules did, and its requests' accounting, since the run's own
// accounting is final by then — is recorded with the run; GetRun returns it as the result's
// learning. A run stays queued until that record is written: learning cut off by a crash or
// by Close is done again (the model asked again) by the next learner, after LearnLease (at
// once after Close), and the facts stored the first time are recognised as duplicates; Drain,
// before Close, lets the learning in flight finish and starts no more.
// Learning from a run is traced in the run's trace, which its SaveRun brought: an
// agentmesh.memory.learn span (Options.TracerProvider) holds the model's request and the
// facts' embedding.
//
// # Knowledge
//
// IngestDir stores a folder of Markdown and text files as chunks in a collection, which the
// action stage's knowledge_search reads. StoreDocument replaces a file's chunks as a unit
// (Store.PutDocument): of two ingestions of a changed file at the same time, the collection
// keeps the chunks of the one that stored it last.
package memory

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/ask"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/grant"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// tracerName is the instrumentation scope of the service's spans.
const tracerName = "github.com/agentmesh/agentmesh/services/memory"

// Defaults and limits of the service.
const (
	// DefaultQuotaPerUser is the number of memories a user may hold when Options.QuotaPerUser is 0.
	DefaultQuotaPerUser = 10000
	// DefaultSearchLimit is the number of hits of a Search whose limit is 0.
	DefaultSearchLimit = 5
	// DefaultPageSize is the page size of a List whose page_size is 0.
	DefaultPageSize = 50
	// MaxPageSize caps the page size of a List.
	MaxPageSize = 500
	// MaxUserIDBytes is the longest user_id, as the public API's and every stage's
	// (auth.MaxIDBytes).
	MaxUserIDBytes = auth.MaxIDBytes
	// MaxNameBytes is the longest collection and conversation_id of a stored memory, as the
	// public API's conversation_id: the collection is kept with every term of the memory. It
	// bounds the memory_id of a Delete too.
	MaxNameBytes = 256
	// MaxMetadataBytes bounds the encoded metadata of a stored memory, kept with it for as
	// long as the memory: a source and a position, not a document (that is content).
	MaxMetadataBytes = 16 << 10
	// MaxContentBytes is the largest content of one memory: about 8,000 tokens, what OpenAI's
	// embedding models take in one input. Store ingested documents in chunks (IngestDir).
	MaxContentBytes = 32 << 10
	// MaxQueryBytes is the longest query of a Search: a run's message (64 KiB), whose goal the
	// context stage searches with, and any knowledge_search query.
	MaxQueryBytes = 64 << 10
)

// Options configures the service.
type Options struct {
	// Store holds the data; nil means a new in-memory store.
	Store Store
	// QuotaPerUser is how many memories one user may hold; 0 means DefaultQuotaPerUser.
	QuotaPerUser int
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Embedder embeds memories and queries for semantic search; nil searches with BM25.
	Embedder Embedder
	// Facts is the model that picks the facts of a finished run worth remembering
	// (models.memory, see FactsTarget), with at most FactsMaxOutputTokens unless it sets
	// MaxOutputTokens; nil picks them with the deterministic rules.
	Facts *ask.Model
	// FactsTimeout is how long Facts may take to answer before the rules pick the facts in
	// its place, leaving the rest of LearnTimeout to embed and store them; 0 means
	// DefaultFactsTimeout.
	FactsTimeout time.Duration
	// RequireUser enforces memory isolation: a call that does not name the user it acts for
	// (auth.UserMetadata) is refused UNAUTHENTICATED. OptionsFromConfig sets it when the
	// public API authenticates its callers (auth.*). A call that names its user is held to it
	// either way.
	RequireUser bool
	// MeshIdentity returns the mesh service named by the verified client certificate of the
	// call in ctx (auth.MeshIdentity, with mTLS between the services); ok is false for a caller
	// that is no mesh service. nil means the transport does not identify callers: every caller
	// is then believed about the user it acts for, so the stage must be reachable by the mesh
	// only (loopback). With it, only mesh services are served, and only the orchestrator may
	// write runs.
	MeshIdentity func(ctx context.Context) (service string, ok bool)
	// Callers are the mesh identities served when MeshIdentity identifies callers (another is
	// PERMISSION_DENIED on every method); empty means DefaultCallers.
	Callers []string
	// UserAssertions verifies the orchestrator's assertions of the user a call acts for
	// (auth.UserAssertionMetadata), with the public key of approval grants. When MeshIdentity
	// identifies callers, a caller other than the orchestrator is served only for the user a
	// valid assertion names; nil believes every caller served about its user, and New logs a
	// warning saying so.
	UserAssertions *grant.Verifier
	// TracerProvider makes the spans of learning from finished runs; nil means the global
	// provider.
	TracerProvider trace.TracerProvider
	// SearchCacheSize is how many searches the retrieval cache holds (seed 002 §8): a search
	// asked again answers from it, without embedding its query or reading the store, until a
	// write to the user's memories through this Service or SearchCacheTTL. 0 means
	// DefaultSearchCacheSize; a negative size turns the cache off.
	SearchCacheSize int
	// SearchCacheTTL is how long a cached search answers; 0 means DefaultSearchCacheTTL.
	SearchCacheTTL time.Duration
}

// Service implements memoryv1.MemoryServiceServer.
type Service struct {
	memoryv1.UnimplementedMemoryServiceServer
	store    Store
	quota    int
	now      func() time.Time
	embedder Embedder
	searches *searchCache // nil when off
	facts    *ask.Model
	// factsTimeout bounds the facts model's answer (Options.FactsTimeout).
	factsTimeout time.Duration
	learner      learner
	tracer       trace.Tracer
	log          *slog.Logger

	requireUser  bool
	meshIdentity func(ctx context.Context) (string, bool)
	callers      []string // the mesh identities served when meshIdentity identifies callers
	assertions   *grant.Verifier
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
	if opts.Facts != nil && opts.Facts.MaxOutputTokens == 0 {
		facts := *opts.Facts
		facts.MaxOutputTokens = FactsMaxOutputTokens
		opts.Facts = &facts
	}
	s := &Service{
		store:        opts.Store,
		quota:        opts.QuotaPerUser,
		now:          opts.Now,
		embedder:     opts.Embedder,
		facts:        opts.Facts,
		factsTimeout: cmp.Or(opts.FactsTimeout, DefaultFactsTimeout),
		log:          slog.Default().With("service", "memory"),

		requireUser:  opts.RequireUser,
		meshIdentity: opts.MeshIdentity,
		callers:      opts.Callers,
		assertions:   opts.UserAssertions,
	}
	if len(s.callers) == 0 {
		s.callers = DefaultCallers
	}
	if s.meshIdentity != nil && s.assertions == nil {
		s.log.Warn("callers are believed about the user they act for: without " +
			"approvals.verify_key the memory stage cannot check the orchestrator's user " +
			"assertions, so a stolen certificate of any of memory.callers reads every user's " +
			"memories")
	}
	if opts.SearchCacheSize >= 0 {
		s.searches = newSearchCache(cmp.Or(opts.SearchCacheSize, DefaultSearchCacheSize),
			cmp.Or(opts.SearchCacheTTL, DefaultSearchCacheTTL))
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	s.tracer = tp.Tracer(tracerName)
	s.learner.ctx, s.learner.cancel = context.WithCancel(context.Background())
	s.learnSoon() // the runs a previous process saved but did not learn from
	return s
}

// Close stops learning from finished runs (a run being learned from stays queued) and closes
// the store when it has a Close method (the SQLite and PostgreSQL stores do): the Service owns
// Options.Store.
func (s *Service) Close() error {
	s.stopLearning()
	if c, ok := s.store.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Register registers the service on g (a gRPC server or an in-process channel).
func (s *Service) Register(g grpc.ServiceRegistrar) {
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
