package recovery_test

import (
	"fmt"
	"testing"

	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/recovery"
)

// TestLongTargetListsAreDecided: a decision over long lists of targets (the run's, those that
// refused the request, those rate-limited in the cycle) takes time linear in them. Each target
// was looked up in the other lists one by one: 50,000 targets and as many refusals and rate
// limits, 2 MB, kept the stage busy for many seconds, and the mesh's 32 MiB messages for
// hours. BenchmarkDecideLongTargetLists measures how the cost grows.
func TestLongTargetListsAreDecided(t *testing.T) {
	resp, err := client(t, recovery.Options{}).Decide(t.Context(), longListsRequest(50_000))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetModifiedAction().GetTarget().GetProvider(); got != "t1" || resp.GetBackoffMs() != 0 {
		t.Errorf("strategy %s to %q after %d ms, want the next target, t1, at once",
			resp.GetStrategy(), got, resp.GetBackoffMs())
	}
}

// longListsRequest asks what to do after a rate limit with n targets, as many refusals and as
// many rate-limited targets.
func longListsRequest(n int) *recoveryv1.DecideRequest {
	state := &recoveryv1.RecoveryState{RunId: "run-1", Target: target("t0")}
	for i := range n {
		state.Targets = append(state.Targets, target(fmt.Sprint("t", i)))
		state.RejectedTargets = append(state.RejectedTargets, target(fmt.Sprint("r", i)))
		state.RateLimited = append(state.RateLimited,
			&recoveryv1.RateLimitedTarget{Target: target(fmt.Sprint("l", i)), RetryAfterMs: 1})
	}
	return &recoveryv1.DecideRequest{
		Error: generation(typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED), Stage: "generation", State: state}
}

// BenchmarkDecideLongTargetLists is a decision over lists of 5,000 targets and of 50,000
// (longListsRequest). It is linear in them, so the larger costs about ten times the smaller.
// Compare them with benchstat's ratio, not a timing assertion.
func BenchmarkDecideLongTargetLists(b *testing.B) {
	svc := recovery.New(recovery.Options{})
	for _, n := range []int{5_000, 50_000} {
		req := longListsRequest(n)
		b.Run(fmt.Sprintf("targets=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := svc.Decide(b.Context(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
