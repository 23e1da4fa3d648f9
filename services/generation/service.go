package generation

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// stageName is the stage reported in StageError details.
const stageName = "generation"

// Options configures the service.
type Options struct {
	// Providers maps the provider names a target may name to their implementations.
	Providers map[string]Provider
	// Prices are the model prices answers are costed with (GenerateResponse.cost_usd); a
	// model without a price costs 0.
	Prices Prices
	// CacheSize is the number of answers the response cache holds; 0 means DefaultCacheSize.
	CacheSize int
	// TracerProvider makes the service's spans; nil means the global provider.
	TracerProvider trace.TracerProvider
	// MeterProvider records the service's metrics (token usage, cost, durations, calls in
	// flight, rate-limit headroom); nil means the global provider.
	MeterProvider metric.MeterProvider
}

// Service implements agentmesh.generation.v1.GenerationService: it is the only stage that
// talks to LLM providers, and turns every answer into the canonical GenerateResponse.
type Service struct {
	generationv1.UnimplementedGenerationServiceServer

	providers map[string]Provider
	prices    Prices
	cache     *responseCache
	tools     *sharedTools
	tracer    trace.Tracer
	metrics   *instruments
}

// New returns a service calling the configured providers.
func New(opts Options) *Service {
	size := opts.CacheSize
	if size <= 0 {
		size = DefaultCacheSize
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	providers := make(map[string]Provider, len(opts.Providers))
	for name, p := range opts.Providers {
		providers[name] = p
	}
	return &Service{providers: providers, prices: opts.Prices, cache: newResponseCache(size), tools: newSharedTools(), tracer: tp.Tracer(tracerName),
		metrics: newInstruments(opts.MeterProvider)}
}

// Register registers the service on g (a gRPC server or an in-process channel).
func (s *Service) Register(g grpc.ServiceRegistrar) {
	generationv1.RegisterGenerationServiceServer(g, s)
}

// Generate makes one LLM attempt and returns the canonical answer, from the response cache
// when use_cache is set and an identical call for the same user was answered before.
func (s *Service) Generate(ctx context.Context, req *generationv1.GenerateRequest) (*generationv1.GenerateResponse, error) {
	p, err := s.validate(req)
	if err != nil {
		return nil, err
	}
	var key string
	if req.GetUseCache() {
		if key, err = requestCacheKey(ctx, req); err != nil {
			return nil, err
		}
		if hit, ok := s.cache.get(key); ok {
			s.cachedChat(ctx, p, req, hit, false)
			return hit, nil
		}
	}
	resp, err := s.generate(ctx, p, req, nil)
	if err != nil {
		return nil, err
	}
	if req.GetUseCache() && cacheable(resp) {
		s.cache.put(key, resp)
	}
	return resp, nil
}

// GenerateStream makes one streamed LLM attempt: text and reasoning deltas as they arrive,
// then the final canonical answer. With use_cache, a cache hit sends only the final answer,
// and a miss streams as any attempt does and stores its final answer as Generate does.
func (s *Service) GenerateStream(in *generationv1.GenerateStreamRequest, stream grpc.ServerStreamingServer[generationv1.GenerateStreamResponse]) error {
	req := in.GetRequest()
	if req == nil {
		return invalid("request must be set")
	}
	p, err := s.validate(req)
	if err != nil {
		return err
	}
	var key string
	if req.GetUseCache() {
		// now: generate drops the request's messages
		if key, err = requestCacheKey(stream.Context(), req); err != nil {
			return err
		}
		if hit, ok := s.cache.get(key); ok {
			s.cachedChat(stream.Context(), p, req, hit, true)
			return stream.Send(final(hit))
		}
	}
	// The headers go out at once: the caller's gRPC then drops the copy of the request it
	// keeps to retry the call elsewhere, which it would otherwise hold for as long as the
	// provider takes to answer.
	if err := stream.SendHeader(nil); err != nil {
		return err
	}
	omitCalls := in.GetOmitToolCallDeltas()
	resp, err := s.generate(stream.Context(), p, req, func(d *generationv1.Delta) error {
		if omitCalls && d.GetToolCall() != nil {
			return nil // the providers put a call's fragments in deltas of their own, without text
		}
		return stream.Send(&generationv1.GenerateStreamResponse{Chunk: &generationv1.GenerateStreamResponse_Delta{Delta: d}})
	})
	if err != nil {
		return err
	}
	if req.GetUseCache() && cacheable(resp) {
		s.cache.put(key, resp)
	}
	return stream.Send(final(resp))
}

// final wraps the final answer of a stream.
func final(resp *generationv1.GenerateResponse) *generationv1.GenerateStreamResponse {
	return &generationv1.GenerateStreamResponse{Chunk: &generationv1.GenerateStreamResponse_Final{Final: resp}}
}

// generate calls the provider (streaming when onDelta is set) inside a chat span and adapts
// the answer. The provider's configured sampling defaults fill the fields the request leaves
// unset. The request is prepared and the answer adapted in calls of their own: the call to the
// provider runs below generate's frame, which the handler's goroutine holds for as long as the
// model answers, and decoding a streamed answer goes deep, so a small frame keeps the goroutine
// within its first 8 KiB of stack (issue 15).
func (s *Service) generate(ctx context.Context, p Provider, req *generationv1.GenerateRequest, onDelta func(*generationv1.Delta) error) (*generationv1.GenerateResponse, error) {
	ctx, c, preq := s.beginChat(ctx, p, req, onDelta != nil)
	defer c.measured.done(ctx)
	defer endOnPanic(c.span, p)
	var (
		raw *Response
		err error
	)
	if onDelta == nil {
		raw, err = p.Complete(ctx, preq)
	} else {
		raw, err = p.Stream(ctx, preq, func(d *generationv1.Delta) error {
			validDelta(d)
			return onDelta(d)
		})
	}
	return s.finishChat(ctx, p, req, c, raw, err)
}

// chat is a call to a provider in progress (generate). It does not hold the provider's
// request, which the provider drops once it has encoded it.
type chat struct {
	sampling *generationv1.Sampling
	span     trace.Span
	measured *measurement
	offered  toolSet // the offered tools, whose schemas repair the answer's calls
	start    time.Time
	prompt   int64 // the estimated tokens of the messages sent, for an answer without usage
}

// beginChat prepares the provider's request of req, and starts its span and measurement.
func (s *Service) beginChat(ctx context.Context, p Provider, req *generationv1.GenerateRequest, stream bool) (context.Context, *chat, *Request) {
	model := req.GetTarget().GetModel()
	c := &chat{sampling: effectiveSampling(p, model, req.GetSampling())}
	ctx, c.span = s.startChat(ctx, p, req, c.sampling, stream, trace.SpanKindClient)
	// From here the request holds the shared copies of its tools: its own decoded ones are
	// garbage while the provider answers.
	tools, toolSchemas, offered := s.tools.share(req.GetTools())
	req.Tools, c.offered = tools, offered
	preq := &Request{
		Model:       model,
		Messages:    req.GetMessages(),
		Tools:       tools,
		ToolSchemas: toolSchemas,
		ToolChoice:  req.GetToolChoice(),
		Sampling:    c.sampling,
	}
	// Counted now, while the stage holds the messages: an answer may report no usage.
	c.prompt = tokens.Messages(req.GetMessages())
	// The conversation is the provider's to encode, and nothing reads it after that: once the
	// provider has encoded preq, the decoded copy is garbage while the model answers, and the
	// conversation is held once (encoded, for a retry of the HTTP request) instead of twice.
	req.Messages = nil
	ctx, c.measured = s.metrics.begin(ctx, genaiconv.OperationNameChat, p.Name(), model)
	c.start = time.Now()
	return ctx, c, preq
}

// finishChat adapts the provider's answer raw (or its failure err) to the canonical answer, its
// usage estimated where the provider reported none (Usage.estimate), and ends the chat's span
// and measurement.
func (s *Service) finishChat(ctx context.Context, p Provider, req *generationv1.GenerateRequest, c *chat, raw *Response, err error) (*generationv1.GenerateResponse, error) {
	latency := time.Since(c.start)
	if err == nil && raw == nil {
		err = stageerr.Generation(typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE, 0, "%s returned no answer", p.Name())
	}
	if err != nil {
		err = providerError(ctx, p, err)
		s.failChat(ctx, req, c, raw, latency, err)
		return nil, err
	}
	validAnswer(raw)
	raw.Usage.estimate(c.prompt, req.GetTools(), raw)
	model := req.GetTarget().GetModel()
	log := slog.Default().With("run_id", req.GetRunId(), "provider", req.GetTarget().GetProvider())
	resp := adapt(raw, c.offered, req.GetStrictMode(), log)
	resp.Provider = req.GetTarget().GetProvider()
	if resp.Model == "" {
		resp.Model = model
	}
	resp.CostUsd = s.prices.cost(resp.Provider, resp.Model, model, resp.Usage, raw.Usage.CacheWrite)
	resp.LatencyMs = latency.Milliseconds()
	if resp.GetStopReason() == "length" && resp.GetContent() == "" && len(resp.GetToolCalls()) == 0 {
		e := maxTokensExceeded(resp, c.sampling.GetMaxOutputTokens(), raw.ContextFull)
		// The provider answered, and charged for the tokens it spent on it: the failure
		// carries them, for the caller's accounting of the attempt.
		e.Accounting = []*typev1.AccountingEntry{failedAttempt(req, resp, e)}
		c.measured.end(ctx, &raw.Usage, resp.GetCostUsd(), e)
		endChat(c.span, resp, e)
		return nil, e
	}
	c.measured.end(ctx, &raw.Usage, resp.GetCostUsd(), nil)
	endChat(c.span, resp, nil)
	return resp, nil
}

// maxTokensExceeded is the failure of an answer cut off before it had any content: at the
// output token limit, or where the model's context window filled up (contextFull); the
// caller sets its Accounting to the answer's.
func maxTokensExceeded(resp *generationv1.GenerateResponse, limit int64,
	contextFull bool) *stageerr.Error {
	where := "the output token limit"
	switch {
	case contextFull:
		where = "its context window (the conversation and the answer filled it)"
	case limit > 0:
		where += fmt.Sprintf(" (max_output_tokens %d)", limit)
	}
	e := stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_MAX_TOKENS_EXCEEDED,
		"%s/%s stopped at %s before producing an answer", resp.GetProvider(), resp.GetModel(), where)
	e.Stage = stageName
	return e
}

// Embed returns one embedding vector per input, with the tokens the provider reported, or the
// estimate of the inputs' when it reported none (Usage.estimateInputs).
func (s *Service) Embed(ctx context.Context, req *generationv1.EmbedRequest) (*generationv1.EmbedResponse, error) {
	p, err := s.provider(req.GetTarget())
	if err != nil {
		return nil, err
	}
	if len(req.GetInputs()) == 0 {
		return nil, invalid("inputs must not be empty")
	}
	model := req.GetTarget().GetModel()
	ctx, span := s.startEmbed(ctx, p, model)
	ctx, measured := s.metrics.begin(ctx, genaiconv.OperationNameEmbeddings, p.Name(), model)
	defer measured.done(ctx)
	defer endOnPanic(span, p)
	out, err := p.Embed(ctx, model, req.GetInputs())
	if err == nil && out == nil {
		out = &Embeddings{}
	}
	if err == nil && len(out.Vectors) != len(req.GetInputs()) {
		err = stageerr.Generation(typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE, 0,
			"%s returned %d embeddings for %d inputs", p.Name(), len(out.Vectors), len(req.GetInputs()))
	}
	if err != nil {
		err = providerError(ctx, p, err)
		measured.end(ctx, nil, 0, err)
		endWithError(span, err)
		return nil, err
	}
	out.Usage.estimateInputs(req.GetInputs())
	resp := &generationv1.EmbedResponse{Model: cmp.Or(out.Model, model), Usage: out.Usage.proto()}
	resp.CostUsd = s.prices.cost(req.GetTarget().GetProvider(), resp.Model, model, resp.Usage, 0)
	measured.end(ctx, &out.Usage, resp.CostUsd, nil)
	span.SetAttributes(semconv.GenAIUsageInputTokens(int(out.Usage.Input)))
	endWithError(span, nil)
	for _, v := range out.Vectors {
		resp.Embeddings = append(resp.Embeddings, &generationv1.Embedding{Values: v})
	}
	return resp, nil
}

// providerError makes sure a provider failure reaches the caller as a stage error of this
// stage; when the caller went away (cancelled, or its deadline passed) and the provider did
// not classify the failure, the context error is returned instead.
func providerError(ctx context.Context, p Provider, err error) error {
	e := stageerr.As(err)
	if e == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	if e == nil && errors.Is(err, context.Canceled) {
		return err
	}
	if e == nil {
		e = stageerr.Generation(typev1.ErrorClass_ERROR_CLASS_UNSPECIFIED, 0, "%s: %w", p.Name(), err)
	}
	if e.Stage == "" {
		e.Stage = stageName
	}
	return e
}
