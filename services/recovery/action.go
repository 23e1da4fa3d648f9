package recovery

import (
	"fmt"
	"slices"

	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// modify returns the changed action a rule proposes, if any, and details for the reason.
func (s *Service) modify(c change, req *recoveryv1.DecideRequest) (*recoveryv1.ModifiedAction, []string) {
	state := req.GetState()
	switch c {
	case nextTarget:
		t := roundRobin(state, openTargets(req), int(req.GetRetryCount()))
		if t == nil {
			return nil, []string{"no targets known, so the same target is used"}
		}
		return &recoveryv1.ModifiedAction{Target: t}, []string{fmt.Sprintf("next target %s/%s", t.GetProvider(), t.GetModel())}
	case longerTimeout:
		base := state.GetTimeoutMs()
		if base == 0 {
			base = DefaultToolTimeout.Milliseconds()
		}
		longer := max(base, min(2*base, s.maxToolTimeout.Milliseconds())) // the cap never shortens it
		return &recoveryv1.ModifiedAction{TimeoutMs: longer}, []string{fmt.Sprintf("timeout %d ms → %d ms", base, longer)}
	case alternativeTool:
		alts := state.GetAlternativeTools()
		if len(alts) == 0 {
			return nil, []string{"no alternative tool; the failure is reported to the model"}
		}
		alt := alts[int(req.GetRetryCount())%len(alts)]
		action := &recoveryv1.ModifiedAction{ToolName: alt}
		if args := state.GetArguments(); args != nil {
			action.Arguments = proto.Clone(args).(*structpb.Struct)
		}
		return action, []string{fmt.Sprintf("alternative tool %q with the same arguments", alt)}
	default:
		return nil, nil
	}
}

// roundRobin returns the first open target after the failed one in state.targets (ai-agent
// §3: attempt N uses targets[(N-1) % len]). When the failed target is not in the list, the
// retry count gives the position: retry_count+1 attempts were made, so the search starts at
// targets[(retry_count+1) % len]. Without a list the failed target is used again, unless it
// refused the request; without either, or when no target is open, nil.
func roundRobin(state *recoveryv1.RecoveryState, open []*typev1.Target, retryCount int) *typev1.Target {
	targets := state.GetTargets()
	failed := state.GetTarget()
	if len(targets) == 0 {
		if failed == nil || len(open) == 0 {
			return nil
		}
		return &typev1.Target{Provider: failed.GetProvider(), Model: failed.GetModel()}
	}
	next := (retryCount + 1) % len(targets)
	if i := slices.IndexFunc(targets, same(failed)); failed != nil && i >= 0 {
		next = (i + 1) % len(targets)
	}
	isOpen := keys(open)
	for k := range len(targets) {
		t := targets[(next+k)%len(targets)]
		if isOpen[keyOf(t)] {
			return &typev1.Target{Provider: t.GetProvider(), Model: t.GetModel()}
		}
	}
	return nil
}

// openTargets are the targets the turn may still try: the run's targets (the failed one when
// the list is empty) but those that refused the request as invalid, state.rejected_targets
// and the failed one when that is how it failed.
func openTargets(req *recoveryv1.DecideRequest) []*typev1.Target {
	state := req.GetState()
	targets := state.GetTargets()
	if len(targets) == 0 && state.GetTarget() != nil {
		targets = []*typev1.Target{state.GetTarget()}
	}
	refused := state.GetRejectedTargets()
	if stageerr.TargetRefuses(req.GetError().GetErrorClass()) && state.GetTarget() != nil {
		refused = append(slices.Clone(refused), state.GetTarget())
	}
	isRefused := keys(refused)
	var open []*typev1.Target
	for _, t := range targets {
		if !isRefused[keyOf(t)] {
			open = append(open, t)
		}
	}
	return open
}

// key is a target's provider and model: targets of the same key are the same target.
type key struct{ provider, model string }

// keyOf returns the key of t.
func keyOf(t *typev1.Target) key { return key{t.GetProvider(), t.GetModel()} }

// keys returns the set of the keys of targets: a request may list thousands of targets, and
// looking each up in another list one by one took time quadratic in them.
func keys(targets []*typev1.Target) map[key]bool {
	set := make(map[key]bool, len(targets))
	for _, t := range targets {
		set[keyOf(t)] = true
	}
	return set
}

// same returns a predicate matching targets of a's provider and model.
func same(a *typev1.Target) func(*typev1.Target) bool {
	return func(b *typev1.Target) bool {
		return a.GetProvider() == b.GetProvider() && a.GetModel() == b.GetModel()
	}
}
