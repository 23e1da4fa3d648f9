package recovery

import (
	"fmt"
	"math"
	"time"

	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
)

// Backoff parameters.
const (
	// rateLimitBase is the first rate-limit backoff (ai-agent §3: "1s → 60s max").
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
		if after := req.GetError().GetRetryAfterMs(); after > 0 {
			return time.Duration(after) * time.Millisecond, []string{fmt.Sprintf("wait %d ms as Retry-After asks", after)}
		}
		d := exponential(rateLimitBase, n)
		return d, []string{fmt.Sprintf("wait %d ms (exponential backoff)", d.Milliseconds())}
	case jitteredWait:
		r := min(max(s.rand(), 0), 1)
		d := min(time.Duration(math.Round(float64(exponential(toolRetryBase, n))*(1-jitter+2*jitter*r))), maxBackoff)
		return d, []string{fmt.Sprintf("wait %d ms (exponential backoff with jitter)", d.Milliseconds())}
	default:
		return 0, nil
	}
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
