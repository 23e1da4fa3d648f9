package generation

import (
	"cmp"
	"context"
	"time"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// failChat ends the measurement and the span of a chat that failed with err. When part of the
// answer had arrived (raw, what the provider's Stream returned beside its failure), the
// provider billed it: its tokens (the provider's usage, else the estimate, estimateBroken) and
// their cost are measured, and a stage error carries them as its accounting, for the caller's
// accounting of the attempt, so that budgets count them.
func (s *Service) failChat(ctx context.Context, req *generationv1.GenerateRequest, c *chat,
	raw *Response, latency time.Duration, err error) {
	if raw == nil || raw.Content == "" && raw.Reasoning == "" && len(raw.ToolCalls) == 0 {
		c.measured.end(ctx, nil, 0, err)
		endWithError(c.span, err)
		return
	}
	raw.Usage.estimateBroken(c.prompt, req.GetTools(), raw)
	model := req.GetTarget().GetModel()
	part := &generationv1.GenerateResponse{
		Provider: req.GetTarget().GetProvider(), Model: cmp.Or(raw.Model, model),
		Usage: raw.Usage.proto(), LatencyMs: latency.Milliseconds(),
	}
	part.CostUsd = s.prices.cost(part.Provider, part.Model, model, part.Usage, raw.Usage.CacheWrite)
	if e := stageerr.As(err); e != nil {
		e.Accounting = []*typev1.AccountingEntry{failedAttempt(req, part, e)}
	}
	c.measured.end(ctx, &raw.Usage, part.CostUsd, err)
	endChat(c.span, part, err)
}

// failedAttempt is the accounting entry of a request to the model of req that failed with e
// after the provider answered resp (all of it, or the part received), which it billed.
func failedAttempt(req *generationv1.GenerateRequest, resp *generationv1.GenerateResponse,
	e *stageerr.Error) *typev1.AccountingEntry {
	return &typev1.AccountingEntry{
		Type: typev1.AccountingType_ACCOUNTING_TYPE_LLM, Provider: resp.GetProvider(),
		Model: req.GetTarget().GetModel(), Status: typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED,
		LatencyMs: resp.GetLatencyMs(), Tokens: resp.GetUsage(), Error: e.Error(),
		StopReason: resp.GetStopReason(), CostUsd: resp.GetCostUsd(), ActualModel: resp.GetModel(),
		Attempts: 1,
	}
}
