package assembly

import (
	"math"

	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/recall"
	"github.com/agentmesh/agentmesh/pkg/runid"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/tokens"
)

// maxModelBytes is the longest model name, as the generation stage's for a request's target
// and the public API's overrides.targets.
const maxModelBytes = 256

// validate returns an INVALID_INPUT error naming the first field that is wrong.
func validate(req *contextv1.AssembleRequest) error {
	if req.GetMaxTokens() <= 0 {
		return stageerr.Invalid("max_tokens must be positive, got %d", req.GetMaxTokens())
	}
	if len(req.GetHistory()) == 0 {
		return stageerr.Invalid("history must not be empty")
	}
	for i, m := range req.GetHistory() {
		if _, known := typev1.Role_name[int32(m.GetRole())]; !known || m.GetRole() == typev1.Role_ROLE_UNSPECIFIED {
			return stageerr.Invalid("history[%d].role must be system, user, assistant or tool", i)
		}
	}
	c := req.GetCounters()
	for _, f := range []struct {
		name  string
		value int64
	}{
		{"max_tokens", req.GetMaxTokens()},
		{"counters.ctx", c.GetCtx()},
		{"counters.pending", c.GetPending()},
		{"counters.new", c.GetNew()},
		{"counters.schema", c.GetSchema()},
		{"context_window", req.GetContextWindow()},
		{"context_window_buffer_tokens", req.GetContextWindowBufferTokens()},
		{"max_output_tokens", req.GetMaxOutputTokens()},
	} {
		if f.value < 0 {
			return stageerr.Invalid("%s must not be negative, got %d", f.name, f.value)
		}
		if f.value > tokens.MaxCount {
			return stageerr.Invalid("%s is %d, over the largest supported token count %d", f.name, f.value, int64(tokens.MaxCount))
		}
	}
	if r := req.GetForceSynthesisAtRatio(); math.IsNaN(r) || r < 0 || r > 1 {
		return stageerr.Invalid("force_synthesis_at_ratio must be between 0 and 1, got %v", r)
	}
	switch n := req.GetMemoryLimit(); {
	case n < 0:
		return stageerr.Invalid("memory_limit must not be negative, got %d", n)
	case n > recall.MaxHits: // the memory stage refuses the search, which would recall nothing
		return stageerr.Invalid("memory_limit must be at most %d, got %d", recall.MaxHits, n)
	}
	if n := len(req.GetRecalled()); n > recall.MaxHits {
		return stageerr.Invalid("recalled: at most %d memories, got %d", recall.MaxHits, n)
	}
	if req.GetMemoryQuery() != "" && req.GetUserId() == "" {
		return stageerr.Invalid("user_id must not be empty when memory_query is set")
	}
	// The memory stage refuses a longer user, which would be reported as memory_unavailable.
	if n := len(req.GetUserId()); n > auth.MaxIDBytes {
		return stageerr.Invalid("user_id: at most %d bytes, got %d", auth.MaxIDBytes, n)
	}
	if err := runid.CheckField("run_id", req.GetRunId()); err != nil {
		return err
	}
	if n := len(req.GetModel()); n > maxModelBytes {
		return stageerr.Invalid("model: at most %d bytes, got %d", maxModelBytes, n)
	}
	if s := req.GetCurrentStep(); s != nil && s.GetId() == "" {
		return stageerr.Invalid("current_step.id must not be empty")
	}
	for i, p := range req.GetPlan() {
		if p.GetStep().GetId() == "" {
			return stageerr.Invalid("plan[%d].step.id must not be empty", i)
		}
		switch p.GetState() {
		case typev1.StepState_STEP_STATE_PENDING, typev1.StepState_STEP_STATE_DONE, typev1.StepState_STEP_STATE_FAILED:
		default:
			return stageerr.Invalid("plan[%d].state must be pending, done or failed, got %s", i, p.GetState())
		}
	}
	if w := req.GetContextWindow(); w > 0 {
		reserved := req.GetContextWindowBufferTokens() + req.GetMaxOutputTokens()
		if w-reserved <= 0 {
			return stageerr.Invalid("context_window %d leaves no room for input: context_window_buffer_tokens + max_output_tokens = %d", w, reserved)
		}
	}
	return nil
}
