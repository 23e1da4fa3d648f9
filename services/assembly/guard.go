package assembly

import (
	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// Guard reasons and trigger (ai-agent §2 Context Management Contract).
const (
	reasonContext = "context"
	reasonRatio   = "force_synthesis_at_ratio"
	triggerTurn   = "turn_preflight"
)

// evaluateGuard runs the turn_preflight context guard. The request's new tokens are flushed
// into pending first; schema defaults to schemaTokens when the request's counters leave it 0.
// With projected = ctx + pending + new + schema and limit = context_window − buffer −
// max_output (positive, checked by validate):
//   - OVERFLOW when ctx + pending alone exceed the limit (not even a turn without tools fits);
//   - FORCE_FINAL ("context") when projected exceeds the limit;
//   - FORCE_FINAL ("force_synthesis_at_ratio") when the ratio is set and projected reaches
//     ratio × context_window;
//   - OK otherwise (projected equal to the limit is OK).
func evaluateGuard(req *contextv1.AssembleRequest, schemaTokens int64) *typev1.GuardReport {
	in := req.GetCounters()
	c := &typev1.GuardCounters{
		Ctx:     in.GetCtx(),
		Pending: in.GetPending() + in.GetNew(),
		Schema:  in.GetSchema(),
	}
	if c.Schema == 0 {
		c.Schema = schemaTokens
	}
	window := req.GetContextWindow()
	r := &typev1.GuardReport{
		Counters:  c,
		Projected: c.GetCtx() + c.GetPending() + c.GetNew() + c.GetSchema(),
		Limit:     window - req.GetContextWindowBufferTokens() - req.GetMaxOutputTokens(),
		Verdict:   typev1.GuardVerdict_GUARD_VERDICT_OK,
		Trigger:   triggerTurn,
	}
	ratio := req.GetForceSynthesisAtRatio()
	switch {
	case c.GetCtx()+c.GetPending() > r.GetLimit():
		r.Verdict, r.Reason = typev1.GuardVerdict_GUARD_VERDICT_OVERFLOW, reasonContext
	case r.GetProjected() > r.GetLimit():
		r.Verdict, r.Reason = typev1.GuardVerdict_GUARD_VERDICT_FORCE_FINAL, reasonContext
	case ratio > 0 && float64(r.GetProjected()) >= ratio*float64(window):
		r.Verdict, r.Reason = typev1.GuardVerdict_GUARD_VERDICT_FORCE_FINAL, reasonRatio
	}
	return r
}
