package generation

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
)

// The service's own metrics, beside the GenAI client metrics of the semantic conventions
// (gen_ai.client.token.usage, gen_ai.client.operation.duration).
const (
	// MetricActiveRequests is the up-down counter of provider calls in flight (chat and
	// embeddings): the signal to scale the stage on.
	MetricActiveRequests = "agentmesh.generation.active_requests"
	// MetricCost is the counter of what answers cost, in US dollars, by provider and model.
	MetricCost = "agentmesh.generation.cost_usd"
	// MetricRemainingRequests is the gauge of the requests a provider's last answer said were
	// left in its rate-limit window, by provider and model.
	MetricRemainingRequests = "agentmesh.generation.rate_limit.remaining_requests"
	// MetricRemainingTokens is the gauge of the tokens a provider's last answer said were left
	// in its rate-limit window, by provider and model.
	MetricRemainingTokens = "agentmesh.generation.rate_limit.remaining_tokens"
)

// meterName is the instrumentation scope of the service's metrics.
const meterName = tracerName

// Bucket boundaries of the GenAI client histograms: those the semantic conventions advise,
// the durations' doubled twice more, past the default step timeout (120 s) an answer may
// take, where the advice ends at 81.92 s.
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
		163.84, 327.68}
)

// instruments are the service's metric instruments. Their attributes are the operation, the
// provider's configured name and the requested model (of a bounded set: see modelNames),
// never a run or a user.
type instruments struct {
	models            modelNames
	tokens            genaiconv.ClientTokenUsage
	duration          genaiconv.ClientOperationDuration
	active            metric.Int64UpDownCounter
	cost              metric.Float64Counter
	remainingRequests metric.Int64Gauge
	remainingTokens   metric.Int64Gauge
}

// newInstruments makes the instruments of mp (the global provider when nil). An instrument
// the provider refuses is reported to otel.Handle and records nothing.
func newInstruments(mp metric.MeterProvider) *instruments {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(meterName)
	var in instruments
	var errs [6]error
	in.tokens, errs[0] = genaiconv.NewClientTokenUsage(m, metric.WithExplicitBucketBoundaries(tokenBuckets...))
	in.duration, errs[1] = genaiconv.NewClientOperationDuration(m, metric.WithExplicitBucketBoundaries(durationBuckets...))
	in.active, errs[2] = m.Int64UpDownCounter(MetricActiveRequests, metric.WithUnit("{request}"),
		metric.WithDescription("Provider calls (chat and embeddings) in flight."))
	in.cost, errs[3] = m.Float64Counter(MetricCost, metric.WithUnit("{USD}"),
		metric.WithDescription("What the provider's answers cost, in US dollars, at the configured prices."))
	in.remainingRequests, errs[4] = m.Int64Gauge(MetricRemainingRequests, metric.WithUnit("{request}"),
		metric.WithDescription("Requests left in the provider's rate-limit window, as its last answer said."))
	in.remainingTokens, errs[5] = m.Int64Gauge(MetricRemainingTokens, metric.WithUnit("{token}"),
		metric.WithDescription("Tokens left in the provider's rate-limit window, as its last answer said."))
	for _, err := range errs {
		if err != nil {
			otel.Handle(err)
		}
	}
	// The calls in flight are served from the start, at 0: the stage's autoscaler scales on
	// them, and a pod without the series has no value for the custom metrics API.
	in.active.Add(context.Background(), 0)
	return &in
}

// measurement is the measuring of one provider call.
type measurement struct {
	in        *instruments
	operation genaiconv.OperationNameAttr
	provider  genaiconv.ProviderNameAttr
	model     attribute.KeyValue
	start     time.Time
}

// begin counts a provider call in flight until its measurement's done; the rate-limit
// headroom its responses announce is recorded through the returned context.
func (in *instruments) begin(ctx context.Context, operation genaiconv.OperationNameAttr, provider, model string) (context.Context, *measurement) {
	c := &measurement{in: in, operation: operation, provider: genaiconv.ProviderNameAttr(provider),
		model: in.duration.AttrRequestModel(in.models.label(provider, model)), start: time.Now()}
	in.active.Add(ctx, 1)
	observed := withRateLimits(ctx, func(l rateLimit) {
		attrs := metric.WithAttributes(semconv.GenAIProviderNameKey.String(provider), c.model)
		if l.requests != nil {
			in.remainingRequests.Record(ctx, *l.requests, attrs)
		}
		if l.tokens != nil {
			in.remainingTokens.Record(ctx, *l.tokens, attrs)
		}
	})
	return observed, c
}

// done counts the call out of those in flight; call it once, whatever happened.
func (c *measurement) done(ctx context.Context) {
	c.in.active.Add(context.WithoutCancel(ctx), -1)
}

// end records the call's duration, with error.type when it failed, and, when the provider
// answered, the tokens it used (input only for embeddings) and what the answer (or the
// embeddings) cost.
func (c *measurement) end(ctx context.Context, usage *Usage, costUSD float64, err error) {
	ctx = context.WithoutCancel(ctx) // a cancelled caller's call is still measured
	if err != nil {
		c.in.duration.Record(ctx, time.Since(c.start).Seconds(), c.operation, c.provider, c.model,
			c.in.duration.AttrErrorType(genaiconv.ErrorTypeAttr(errorType(err))))
	} else {
		c.in.duration.Record(ctx, time.Since(c.start).Seconds(), c.operation, c.provider, c.model)
	}
	if usage == nil {
		return
	}
	c.in.tokens.Record(ctx, usage.Input, c.operation, c.provider, genaiconv.TokenTypeInput, c.model)
	if c.operation != genaiconv.OperationNameEmbeddings {
		c.in.tokens.Record(ctx, usage.Output, c.operation, c.provider, genaiconv.TokenTypeOutput, c.model)
	}
	provider := semconv.GenAIProviderNameKey.String(string(c.provider))
	c.in.cost.Add(ctx, costUSD, metric.WithAttributes(provider, c.model))
}
