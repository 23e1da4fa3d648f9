// Package observation implements the ObservationService: it turns a raw tool result into the
// observation the model sees. A result larger than the run's budget is summarised by the
// observation model when one is configured (seed 001's summarizer_model, config
// models.observation), and truncated otherwise, or when the model fails, with the exact notice
// of the ai-agent contract; failures become "(tool failed: <reason>)"; JSON output and
// knowledge_search's references are parsed into structured data, and a tool that declares an
// output schema must return JSON that matches it (PARSE_ERROR).
package observation

import (
	"context"
	"log/slog"
	"net/url"
	"time"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	observationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/observation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/runid"
	"github.com/agentmesh/agentmesh/pkg/schema"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/toolname"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// DefaultMaxInputBytes is the largest raw result accepted when Options.MaxInputBytes is 0.
const DefaultMaxInputBytes = 16 << 20

// Options configures the service.
type Options struct {
	// MaxInputBytes is the largest raw_result accepted; a larger one cannot be summarised
	// adequately and fails with OBSERVATION_TOO_LARGE. A response that would be larger leaves
	// out its structured result. 0 means DefaultMaxInputBytes (16 MiB).
	MaxInputBytes int64
	// Generation is the generation service the observation model is asked through; with
	// Model it turns summaries on.
	Generation generationv1.GenerationServiceClient
	// Model is the observation model (config models.observation); nil truncates every result
	// over its budget.
	Model *typev1.Target
	// SummaryInputBytes is how much of a result the observation model reads; 0 means
	// DefaultSummaryInputBytes.
	SummaryInputBytes int
	// ContextWindow, ContextWindowBufferTokens and MaxOutputTokens are the observation
	// model's limits (config.Window): what it reads of a result is cut to fit the window, and
	// its summary asks for at most MaxOutputTokens. A ContextWindow of 0 is unknown.
	ContextWindow, ContextWindowBufferTokens, MaxOutputTokens int64
	// Logger receives the warnings of truncated results and unusable summaries; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Service implements observationv1.ObservationServiceServer.
type Service struct {
	observationv1.UnimplementedObservationServiceServer
	maxInput   int64
	summarizer *summarizer // nil: no observation model
	log        *slog.Logger
}

// New returns a Service configured by opts.
func New(opts Options) *Service {
	if opts.MaxInputBytes <= 0 {
		opts.MaxInputBytes = DefaultMaxInputBytes
	}
	if opts.SummaryInputBytes <= 0 {
		opts.SummaryInputBytes = DefaultSummaryInputBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Service{maxInput: opts.MaxInputBytes, log: opts.Logger.With("service", "observation")}
	if opts.Generation != nil && opts.Model != nil {
		s.summarizer = &summarizer{client: opts.Generation, target: opts.Model, inputBytes: opts.SummaryInputBytes,
			window: opts.ContextWindow, buffer: opts.ContextWindowBufferTokens, maxOutput: opts.MaxOutputTokens}
	}
	return s
}

// Register registers the service on g (a gRPC server or an in-process channel).
func (s *Service) Register(g grpc.ServiceRegistrar) {
	observationv1.RegisterObservationServiceServer(g, s)
}

// Observe turns one raw tool result into an observation.
//
// A failed execution (status ERROR or TIMEOUT) becomes "(tool failed: <reason>)". A successful
// one (an unspecified status counts as success) is passed through when it fits max_bytes.
// Over max_bytes it is summarised by the observation model (not knowledge_search's references,
// which the model must see as retrieved), with the notice "[SUMMARIZED]
// Original size X bytes; summarized to Y bytes by <provider>/<model>." on its own first line;
// without a model, or when the model fails, answers nothing, answers over max_bytes, is cut
// off at its output limit or stopped by its provider's content filter, or does not answer
// before a tenth of the caller's time is left (summary_error says which), it is
// truncated to max_bytes at a rune boundary with the notice
// "[TRUNCATED] Original size X bytes; truncated to Y bytes." on its own first line, and a
// warning is logged with the tool name, actual and limit bytes. Its structure is parsed from
// the whole result (see structure), and left out when the response would then be over the
// stage's input limit (Options.MaxInputBytes). should_continue is always true: this stage
// never tells the orchestrator to answer now (the final report is the orchestrator's own tool,
// which no action tool may be named after, so it is never observed here).
func (s *Service) Observe(ctx context.Context, req *observationv1.ObserveRequest) (*observationv1.ObserveResponse, error) {
	output, err := s.validate(req)
	if err != nil {
		return nil, err
	}
	raw := req.GetRawResult()
	resp := &observationv1.ObserveResponse{
		OriginalBytes:  int64(len(raw)),
		ShouldContinue: true,
	}
	switch req.GetStatus() {
	case typev1.ToolStatus_TOOL_STATUS_ERROR:
		// A failure's text is the tool's too (an MCP result marked isError is passed through
		// whole): over max_bytes it is truncated as a result is, not summarised.
		reason, cut := truncate(req.GetError(), req.GetMaxBytes())
		resp.Observation, resp.Truncated = failed(reason), cut
		return resp, nil
	case typev1.ToolStatus_TOOL_STATUS_TIMEOUT:
		resp.Observation = failed("timeout")
		return resp, nil
	}

	structured, err := structure(req, output)
	if err != nil {
		return nil, err
	}
	resp.Success, resp.Structured = true, structured
	switch limit := req.GetMaxBytes(); {
	case raw == "":
		resp.Observation = NoOutput
	case limit == 0 || int64(len(raw)) <= limit:
		resp.Observation = raw
	default:
		s.overBudget(ctx, req, resp)
	}
	if resp.Structured != nil && int64(proto.Size(resp)) > s.maxInput {
		// A Struct takes several times the bytes of its JSON (11 for each number of an
		// array): a response that carried it could be over the gRPC message limit, which the
		// input limit keeps within, and the tool would fail instead of being observed.
		resp.Structured = nil
		s.log.WarnContext(ctx, "structured result left out: the response would be over the input limit",
			"run_id", req.GetRunId(), "tool", req.GetToolName(), "actual_bytes", len(raw), "limit_bytes", s.maxInput)
	}
	return resp, nil
}

// overBudget sets the observation of a result over max_bytes: the observation model's
// summary, or the truncated result. knowledge_search's references are always truncated: an
// answer is grounded only in the text the retriever gave, cited by its numbered references and
// files (seed 002 §4), which a summary would rewrite.
func (s *Service) overBudget(ctx context.Context, req *observationv1.ObserveRequest, resp *observationv1.ObserveResponse) {
	raw := req.GetRawResult()
	if s.summarizer != nil && req.GetToolName() != KnowledgeSearchTool {
		summary, entry, err := s.summarizer.summarize(ctx, req)
		if entry != nil { // nil: no request was made
			resp.Accounting = append(resp.Accounting, entry)
		}
		if err == nil {
			resp.Observation, resp.Summarized = summarized(summary, len(raw), s.summarizer.target), true
			return
		}
		resp.SummaryError = err.Error()
		s.log.WarnContext(ctx, "summary unusable; truncating the tool response instead",
			"run_id", req.GetRunId(), "tool", req.GetToolName(), "err", err)
	}
	resp.Observation, resp.Truncated = truncate(raw, req.GetMaxBytes())
	s.log.WarnContext(ctx, "tool response truncated",
		"run_id", req.GetRunId(), "tool", req.GetToolName(), "actual_bytes", len(raw), "limit_bytes", req.GetMaxBytes())
}

// validate checks the request and returns its output_schema compiled, nil when it has none. An
// output_schema that is not a valid JSON schema is the request's fault whatever the result.
func (s *Service) validate(req *observationv1.ObserveRequest) (*schema.Schema, error) {
	if req.GetToolName() == "" {
		return nil, stageerr.Invalid("tool_name must not be empty")
	}
	// A name of megabytes went into logs, errors and the output schema's URL.
	if n := len(req.GetToolName()); n > toolname.MaxRequestBytes {
		return nil, stageerr.Invalid("tool_name: at most %d bytes, got %d", toolname.MaxRequestBytes, n)
	}
	if req.GetMaxBytes() < 0 {
		return nil, stageerr.Invalid("max_bytes must not be negative, got %d", req.GetMaxBytes())
	}
	if _, ok := typev1.ToolStatus_name[int32(req.GetStatus())]; !ok {
		return nil, stageerr.Invalid("status %d is not a known tool status", req.GetStatus())
	}
	// The run (none when empty) scopes the summary's request: an id the generation stage
	// refuses would truncate the result instead, without saying why.
	if err := runid.CheckField("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	if n := int64(len(req.GetRawResult())); n > s.maxInput {
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_OBSERVATION_TOO_LARGE,
			"raw_result is %d bytes, over the limit of %d bytes that can be observed", n, s.maxInput)
	}
	out := req.GetOutputSchema()
	if out == nil {
		return nil, nil
	}
	// The document's URL names the tool, escaped: a name may be any text, and one that is no
	// URL path ("100%") made a valid schema fail.
	compiled, err := schema.Compile("observation:///"+url.PathEscape(req.GetToolName())+".output.json", out.AsMap())
	if err != nil {
		return nil, stageerr.Invalid("output_schema of %s is not a valid JSON schema: %v", req.GetToolName(), err)
	}
	return compiled, nil
}

// DrainTimeout is how long a stopping observation stage with a model of its own
// (models.observation) lets its calls in flight finish (pkg/server.WithDrainTimeout): a
// summary, which may take the default step timeout (defaults.step_timeout_ms; the orchestrator
// waits that long for an observation), and server.DrainMargin to answer.
// Cut off sooner, the summary is asked of the model (and paid for) again by the retry. ok is
// false without a model: the stage's calls are then quick, and the default drain is enough.
func DrainTimeout(cfg *config.Config) (d time.Duration, ok bool) {
	step := time.Duration(cfg.Defaults.StepTimeoutMS) * time.Millisecond
	return server.DrainFor(step), cfg.StageModel(cfg.Models.Observation) != nil
}

// OptionsFromConfig returns the options the configuration sets: the input limit
// (observation.max_input_bytes) and the observation model (models.observation). The caller
// dials the generation service when Model is set.
func OptionsFromConfig(cfg *config.Config) Options {
	opts := Options{MaxInputBytes: cfg.Observation.MaxInputBytes}
	if opts.MaxInputBytes == 0 {
		opts.MaxInputBytes = min(DefaultMaxInputBytes, int64(cfg.GRPC.MaxMessageBytes))
	}
	if m := cfg.StageModel(cfg.Models.Observation); m != nil {
		opts.Model = &typev1.Target{Provider: m.Provider, Model: m.Model}
		opts.ContextWindow, opts.ContextWindowBufferTokens, opts.MaxOutputTokens = cfg.Window(*m)
	}
	return opts
}
