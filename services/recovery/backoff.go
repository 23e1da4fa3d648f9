package recovery

import (
	"fmt"
	"math"
	"time"

	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
)

// Backoff parameters.
const (
	// rateLimitBase is the first rate-limit backoff without a Retry-After (ai-agent §3: "1s →
	// 60s max"), jittered.
	rateLimitBase = time.Second
	// toolRetryBase is the first backoff of a timed-out tool call.
	toolRetryBase = 500 * time.Millisecond
	// maxBackoff caps every computed backoff.
	maxBackoff = 60 * time.Second
	// jitter is the relative spread of a jittered backoff (±20 %).
	jitter = 0.2
)

// backoff returns how long to wait under a rule, and details for the reason.
func (s *Service) backoff(w wait, req *recoveryv1.DecideRequest) (time.Duration, []string) {
	n := int(req.GetRetryCount())
	switch w {
	case rateLimitWait:
		if !everyTargetRateLimited(req) {
			return 0, []string{"a target not yet rate-limited in this cycle is tried at once"}
		}
		if after := cycleRetryAfter(req); after > 0 {
			// Capped in milliseconds: a Retry-After of centuries overflows a Duration.
			d := time.Duration(min(after, maxBackoff.Milliseconds())) * time.Millisecond
			detail := fmt.Sprintf("every target is rate-limited in this cycle: wait %d ms, the largest Retry-After", d.Milliseconds())
			if d.Milliseconds() < after {
				detail += fmt.Sprintf(" (%d ms) capped", after)
			}
			return d, []string{detail}
		}
		// Jittered (RAG contract §8), so that runs rate-limited together do not all ask again
		// at the same moment.
		d := s.jittered(rateLimitBase, n)
		return d, []string{fmt.Sprintf("every target is rate-limited in this cycle: wait %d ms (exponential backoff with jitter)", d.Milliseconds())}
	case jitteredWait:
		d := s.jittered(toolRetryBase, n)
		return d, []string{fmt.Sprintf("wait %d ms (exponential backoff with jitter)", d.Milliseconds())}
	default:
		return 0, nil
	}
}

// jittered returns base · 2^n spread by ±jitter, at most maxBackoff.
func (s *Service) jittered(base time.Duration, n int) time.Duration {
	r := min(max(s.rand(), 0), 1)
	return min(time.Duration(math.Round(float64(exponential(base, n))*(1-jitter+2*jitter*r))), maxBackoff)
}

// exponential returns base · 2^n, at most maxBackoff.
func exponential(base time.Duration, n int) time.Duration {
	d := base
	for range n {
		if d >= maxBackoff {
			break
		}
		d *= 2
	}
	return min(d, maxBackoff)
}

// everyTargetRateLimited reports whether every target still open in the turn was
// rate-limited in the current round-robin cycle: listed in state.rate_limited, or the one that
// just failed.
func everyTargetRateLimited(req *recoveryv1.DecideRequest) bool {
	state := req.GetState()
	limited := make(map[key]bool, len(state.GetRateLimited())+1)
	limited[keyOf(state.GetTarget())] = true
	for _, r := range state.GetRateLimited() {
		limited[keyOf(r.GetTarget())] = true
	}
	for _, t := range openTargets(req) {
		if !limited[keyOf(t)] {
			return false
		}
	}
	return true
}

// cycleRetryAfter is the largest Retry-After of the cycle, in milliseconds: the failure's own
// and those of state.rate_limited.
func cycleRetryAfter(req *recoveryv1.DecideRequest) int64 {
	ms := req.GetError().GetRetryAfterMs()
	for _, r := range req.GetState().GetRateLimited() {
		ms = max(ms, r.GetRetryAfterMs())
	}
	return ms
}
