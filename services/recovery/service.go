package recovery

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/runid"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/target"
	"github.com/agentmesh/agentmesh/pkg/toolname"
	"google.golang.org/grpc"
)

// Defaults of Options.
const (
	// DefaultMaxRetries is the retry budget per action ("max 3 retries per action").
	DefaultMaxRetries = 3
	// DefaultMaxToolTimeout caps the longer timeout of a retried tool call.
	DefaultMaxToolTimeout = 5 * time.Minute
	// DefaultToolTimeout is the timeout assumed when the failed action reports none.
	DefaultToolTimeout = 30 * time.Second
)

// MaxStageBytes is the longest stage name a request may give: the stage is quoted in the
// decision's reason and logged with it, and a stage's name ("generation", "observation") is
// a word.
const MaxStageBytes = 64

// Options configures the recovery service.
type Options struct {
	// MaxRetries is the retry budget of an action whose state has no max_retries; 0 means
	// DefaultMaxRetries.
	MaxRetries int
	// MaxToolTimeout caps the doubled timeout of a retried tool call (one that timed out with a
	// longer timeout keeps it); 0 means DefaultMaxToolTimeout.
	MaxToolTimeout time.Duration
	// Rand returns a number in [0, 1) for backoff jitter; nil means math/rand/v2.Float64. It
	// must be safe for concurrent use.
	Rand func() float64
	// Logger receives one record per decision; nil means slog.Default().
	Logger *slog.Logger
}

// Service implements recoveryv1.RecoveryServiceServer.
type Service struct {
	recoveryv1.UnimplementedRecoveryServiceServer
	maxRetries     int
	maxToolTimeout time.Duration
	rand           func() float64
	log            *slog.Logger
}

// New returns a Service configured by opts.
func New(opts Options) *Service {
	s := &Service{maxRetries: opts.MaxRetries, maxToolTimeout: opts.MaxToolTimeout, rand: opts.Rand, log: opts.Logger}
	if s.maxRetries <= 0 {
		s.maxRetries = DefaultMaxRetries
	}
	if s.maxToolTimeout <= 0 {
		s.maxToolTimeout = DefaultMaxToolTimeout
	}
	if s.rand == nil {
		s.rand = rand.Float64
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// Register registers the service on g (a gRPC server or an in-process channel).
func (s *Service) Register(g grpc.ServiceRegistrar) {
	recoveryv1.RegisterRecoveryServiceServer(g, s)
}

// Decide applies the strategy table to a failure.
func (s *Service) Decide(ctx context.Context, req *recoveryv1.DecideRequest) (*recoveryv1.DecideResponse, error) {
	if err := validate(req); err != nil {
		return nil, err
	}
	failure := failureName(req.GetError())
	r := lookup(req.GetError(), req.GetState())
	resp := &recoveryv1.DecideResponse{Strategy: r.strategy, UserMessage: r.message}

	budget := s.maxRetries
	if m := req.GetState().GetMaxRetries(); m > 0 {
		budget = int(m)
	}
	n := int(req.GetRetryCount())
	giveUp := func(why string) {
		resp.Strategy = abort
		resp.UserMessage = cmp.Or(r.gaveUp, msgGaveUp)
		resp.Reason = fmt.Sprintf("%s in stage %q: %s; would otherwise %s", failure, req.GetStage(), why, r.reason)
	}
	switch {
	case (r.strategy == retry || r.strategy == fallback) && n >= budget:
		giveUp(fmt.Sprintf("retry limit reached (%d retries made, the limit is %d)", n, budget))
	case r.change == nextTarget && noTargetLeft(req):
		giveUp(fmt.Sprintf("every target refused the request (%d of %d)", len(req.GetState().GetRejectedTargets())+1, max(len(req.GetState().GetTargets()), 1)))
	case r.change == nextTarget && req.GetState().GetLastAttempt():
		giveUp("the turn's last attempt failed")
	default:
		details := []string{r.reason}
		action, detail := s.modify(r.change, req)
		details = append(details, detail...)
		backoff, detail := s.backoff(r.wait, req)
		details = append(details, detail...)
		if left := req.GetState().GetTimeLeftMs(); left > 0 && backoff.Milliseconds() >= left {
			giveUp(fmt.Sprintf("waiting %d ms would outlast the run, which has %d ms left", backoff.Milliseconds(), left))
			break
		}
		resp.ModifiedAction, resp.BackoffMs = action, backoff.Milliseconds()
		resp.Reason = fmt.Sprintf("%s in stage %q: %s", failure, req.GetStage(), strings.Join(details, "; "))
	}

	fallBackToModel(req, resp)

	s.log.InfoContext(ctx, "recovery decided",
		slog.String("run_id", req.GetState().GetRunId()),
		slog.String("stage", req.GetStage()),
		slog.String("failure", failure),
		slog.Int("retry_count", n),
		slog.String("strategy", resp.GetStrategy().String()),
		slog.Int64("backoff_ms", resp.GetBackoffMs()))
	return resp, nil
}

// validate refuses malformed requests: among them a stage over MaxStageBytes and a run id
// the README does not allow (runid.CheckField; empty is a decision for no run).
func validate(req *recoveryv1.DecideRequest) error {
	switch {
	case req.GetError() == nil:
		return stageerr.Invalid("error is required")
	case strings.TrimSpace(req.GetStage()) == "":
		return stageerr.Invalid("stage must not be empty")
	case len(req.GetStage()) > MaxStageBytes:
		return stageerr.Invalid("stage: at most %d bytes, got %d", MaxStageBytes, len(req.GetStage()))
	case req.GetError().GetRetryAfterMs() < 0:
		return stageerr.Invalid("error.retry_after_ms must not be negative, got %d", req.GetError().GetRetryAfterMs())
	case req.GetRetryCount() < 0:
		return stageerr.Invalid("retry_count must not be negative, got %d", req.GetRetryCount())
	case req.GetState().GetMaxRetries() < 0:
		return stageerr.Invalid("state.max_retries must not be negative, got %d", req.GetState().GetMaxRetries())
	case req.GetState().GetTimeoutMs() < 0:
		return stageerr.Invalid("state.timeout_ms must not be negative, got %d", req.GetState().GetTimeoutMs())
	case req.GetState().GetTimeLeftMs() < 0:
		return stageerr.Invalid("state.time_left_ms must not be negative, got %d", req.GetState().GetTimeLeftMs())
	}
	if err := runid.CheckField("state.run_id", req.GetState().GetRunId()); err != nil {
		return err
	}
	for i, r := range req.GetState().GetRateLimited() {
		if r.GetRetryAfterMs() < 0 {
			return stageerr.Invalid("state.rate_limited[%d].retry_after_ms must not be negative, got %d", i, r.GetRetryAfterMs())
		}
	}
	return validateNames(req.GetState())
}

// validateNames refuses a target without a provider or a model (a decision may propose it as
// the next target or the fallback model), a target's provider or model over
// target.MaxNameBytes and an alternative tool over toolname.MaxRequestBytes: a decision's
// reason quotes them.
func validateNames(state *recoveryv1.RecoveryState) error {
	checkTarget := func(field string, t *typev1.Target) error {
		if t != nil && (t.GetProvider() == "" || t.GetModel() == "") {
			return stageerr.Invalid("%s needs both provider and model", field)
		}
		return target.CheckNames(field, t)
	}
	if err := checkTarget("state.target", state.GetTarget()); err != nil {
		return err
	}
	if err := checkTarget("state.fallback_target", state.GetFallbackTarget()); err != nil {
		return err
	}
	for i, t := range state.GetTargets() {
		if err := checkTarget(fmt.Sprintf("state.targets[%d]", i), t); err != nil {
			return err
		}
	}
	for i, t := range state.GetRejectedTargets() {
		if err := checkTarget(fmt.Sprintf("state.rejected_targets[%d]", i), t); err != nil {
			return err
		}
	}
	for i, r := range state.GetRateLimited() {
		if err := checkTarget(fmt.Sprintf("state.rate_limited[%d].target", i), r.GetTarget()); err != nil {
			return err
		}
	}
	for i, tool := range state.GetAlternativeTools() {
		if n := len(tool); n > toolname.MaxRequestBytes {
			return stageerr.Invalid("state.alternative_tools[%d]: at most %d bytes, got %d", i, toolname.MaxRequestBytes, n)
		}
	}
	return nil
}

// noTargetLeft reports whether every known target refused the request, so no next target
// exists.
func noTargetLeft(req *recoveryv1.DecideRequest) bool {
	known := len(req.GetState().GetTargets()) > 0 || req.GetState().GetTarget() != nil
	return known && len(openTargets(req)) == 0
}

// failureName names a failure for the reason, e.g. "GENERATION_FAILED (RATE_LIMITED)".
func failureName(e *typev1.StageError) string {
	name := stageerr.CodeName(e.GetCode())
	if e.GetCode() == typev1.StageErrorCode_STAGE_ERROR_CODE_GENERATION_FAILED {
		name += " (" + stageerr.ClassName(e.GetErrorClass()) + ")"
	}
	return name
}
