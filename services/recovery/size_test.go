package recovery_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/recovery"
)

// TestLongTargetListsAreDecidedQuickly: a decision over long lists of targets (the run's,
// those that refused the request, those rate-limited in the cycle) takes time linear in them.
// Each target was looked up in the other lists one by one: 50,000 targets and as many
// refusals and rate limits, 2 MB, kept the stage busy for many seconds, and the mesh's 32 MiB
// messages for hours. The deadline is far more than deciding takes.
func TestLongTargetListsAreDecidedQuickly(t *testing.T) {
	const n = 50_000
	state := &recoveryv1.RecoveryState{RunId: "run-1", Target: target("t0")}
	for i := range n {
		state.Targets = append(state.Targets, target(fmt.Sprint("t", i)))
		state.RejectedTargets = append(state.RejectedTargets, target(fmt.Sprint("r", i)))
		state.RateLimited = append(state.RateLimited,
			&recoveryv1.RateLimitedTarget{Target: target(fmt.Sprint("l", i)), RetryAfterMs: 1})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := client(t, recovery.Options{}).Decide(ctx, &recoveryv1.DecideRequest{
		Error: generation(typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED), Stage: "generation", State: state})
	if err != nil {
		t.Fatalf("after %s: %v", time.Since(start), err)
	}
	if got := resp.GetModifiedAction().GetTarget().GetProvider(); got != "t1" || resp.GetBackoffMs() != 0 {
		t.Errorf("strategy %s to %q after %d ms, want the next target, t1, at once",
			resp.GetStrategy(), got, resp.GetBackoffMs())
	}
}
