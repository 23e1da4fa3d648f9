package stagetest

import (
	"context"
	"fmt"
	"slices"
	"strings"

	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// maxBackoffMs is the longest wait the ai-agent contract allows between attempts.
const maxBackoffMs = 60_000

var (
	targetA = &typev1.Target{Provider: "a", Model: "m"}
	targetB = &typev1.Target{Provider: "b", Model: "m"}
	targetC = &typev1.Target{Provider: "c", Model: "m"}
	// fallbackTarget is the run's simpler model (config models.fallback).
	fallbackTarget = &typev1.Target{Provider: "simple", Model: "small"}
)

var recoveryCases = []testCase{
	{"auth-fatal", "an LLM authentication failure aborts (never retried)",
		decide(generationFailure(typev1.ErrorClass_ERROR_CLASS_AUTH), "generation", 0, &recoveryv1.RecoveryState{Target: targetA, Targets: []*typev1.Target{targetA, targetB}},
			recoveryv1.Strategy_STRATEGY_ABORT)},
	{"quota-fatal", "an LLM quota failure aborts (never retried)",
		decide(generationFailure(typev1.ErrorClass_ERROR_CLASS_QUOTA), "generation", 0, &recoveryv1.RecoveryState{Target: targetA, Targets: []*typev1.Target{targetA, targetB}},
			recoveryv1.Strategy_STRATEGY_ABORT)},
	{"rate-limit-retried", "a rate limit on the first attempt is retried or falls back, waiting at most 60 s",
		decide(generationFailure(typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED), "generation", 0, &recoveryv1.RecoveryState{Target: targetA, Targets: []*typev1.Target{targetA, targetB}},
			recoveryv1.Strategy_STRATEGY_RETRY, recoveryv1.Strategy_STRATEGY_FALLBACK)},
	{"rate-limit-next-target", "a rate limit while another target is not limited goes to that target at once (seed 000 §3: cycle to the next target)",
		nextTargetAtOnce(typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED)},
	{"network-next-target", "a network failure of the model goes to the next target at once, without backoff (seed 000 §3)",
		nextTargetAtOnce(typev1.ErrorClass_ERROR_CLASS_NETWORK)},
	{"timeout-next-target", "a timed-out model request goes to the next target at once, without backoff (seed 000 §3)",
		nextTargetAtOnce(typev1.ErrorClass_ERROR_CLASS_TIMEOUT)},
	{"server-next-target", "a provider's server error goes to the next target at once, without backoff (seed 000 §3)",
		nextTargetAtOnce(typev1.ErrorClass_ERROR_CLASS_SERVER)},
	{"rejected-targets-avoided", "a target that refused the turn's request as invalid is never chosen again: a server error of A goes to C when B refused, and a refusal by A when B refused too ends the turn (no retry or fallback on them)",
		func(ctx context.Context, k *kit) error {
			d, err := ask(ctx, k, &recoveryv1.DecideRequest{Error: generationFailure(typev1.ErrorClass_ERROR_CLASS_SERVER), Stage: "generation",
				State: &recoveryv1.RecoveryState{RunId: k.id("run"), Target: targetA, Targets: []*typev1.Target{targetA, targetB, targetC},
					RejectedTargets: []*typev1.Target{targetB}}})
			if err != nil {
				return err
			}
			if t := d.GetModifiedAction().GetTarget(); !isRetry(d) || t.GetProvider() != targetC.GetProvider() {
				return fmt.Errorf("server error of a/m with b/m refused: strategy %s to %s/%s, want the next target that has not refused, c/m",
					d.GetStrategy(), t.GetProvider(), t.GetModel())
			}
			d, err = ask(ctx, k, &recoveryv1.DecideRequest{Error: generationFailure(typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST), Stage: "generation",
				State: &recoveryv1.RecoveryState{RunId: k.id("run"), Target: targetA, Targets: []*typev1.Target{targetA, targetB},
					RejectedTargets: []*typev1.Target{targetB}}})
			if err != nil {
				return err
			}
			if t := d.GetModifiedAction().GetTarget(); isRetry(d) {
				return fmt.Errorf("a/m refused the request and b/m had: strategy %s to %s/%s, want no retry or fallback (every target refused)",
					d.GetStrategy(), t.GetProvider(), t.GetModel())
			}
			return nil
		}},
	{"context-overflow-next-target", "a request its target refused as longer than its context window (CONTEXT_OVERFLOW) goes to another target, which may have a larger window, and never back to the one that refused it: when every other target refused too, the turn ends",
		func(ctx context.Context, k *kit) error {
			for _, rejected := range [][]*typev1.Target{nil, {targetB}} {
				d, err := ask(ctx, k, &recoveryv1.DecideRequest{Error: generationFailure(typev1.ErrorClass_ERROR_CLASS_CONTEXT_OVERFLOW), Stage: "generation",
					State: &recoveryv1.RecoveryState{RunId: k.id("run"), Target: targetA, Targets: []*typev1.Target{targetA, targetB},
						RejectedTargets: rejected}})
				if err != nil {
					return err
				}
				t := d.GetModifiedAction().GetTarget()
				switch {
				case rejected == nil && (!isRetry(d) || t.GetProvider() != targetB.GetProvider()):
					return fmt.Errorf("a/m refused the request as too long: strategy %s to %s/%s, want the other target, b/m",
						d.GetStrategy(), t.GetProvider(), t.GetModel())
				case rejected != nil && isRetry(d):
					return fmt.Errorf("a/m refused the request as too long and b/m had refused it: strategy %s to %s/%s, want no retry or fallback",
						d.GetStrategy(), t.GetProvider(), t.GetModel())
				}
			}
			return nil
		}},
	{"fallback-model", "a model failure on the turn's last attempt goes to state.fallback_target, the run's simpler model, at once (seed 003: LLM error, fallback to a simpler model)",
		func(ctx context.Context, k *kit) error {
			d, err := ask(ctx, k, &recoveryv1.DecideRequest{Error: generationFailure(typev1.ErrorClass_ERROR_CLASS_SERVER), Stage: "generation", RetryCount: 2,
				State: &recoveryv1.RecoveryState{RunId: k.id("run"), Target: targetB, Targets: []*typev1.Target{targetA, targetB},
					LastAttempt: true, FallbackTarget: fallbackTarget}})
			if err != nil {
				return err
			}
			if t := d.GetModifiedAction().GetTarget(); !isRetry(d) || t.GetProvider() != fallbackTarget.GetProvider() || t.GetModel() != fallbackTarget.GetModel() || d.GetBackoffMs() != 0 {
				return fmt.Errorf("strategy %s to %s/%s after %d ms, want a fallback to the fallback target %s/%s at once",
					d.GetStrategy(), t.GetProvider(), t.GetModel(), d.GetBackoffMs(), fallbackTarget.GetProvider(), fallbackTarget.GetModel())
			}
			return nil
		}},
	{"wait-outlasts-run", "a rate limit whose Retry-After (30 s) is longer than the run has left (1 s) is not waited for",
		func(ctx context.Context, k *kit) error {
			e := generationFailure(typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED)
			e.RetryAfterMs = 30_000
			d, err := ask(ctx, k, &recoveryv1.DecideRequest{Error: e, Stage: "generation",
				State: &recoveryv1.RecoveryState{RunId: k.id("run"), Target: targetA, Targets: []*typev1.Target{targetA}, TimeLeftMs: 1000}})
			if err != nil {
				return err
			}
			if isRetry(d) && d.GetBackoffMs() >= 1000 {
				return fmt.Errorf("strategy %s after %d ms, and the run has 1000 ms left: the run would time out waiting", d.GetStrategy(), d.GetBackoffMs())
			}
			return nil
		}},
	{"timeout-longer", "a timed-out idempotent tool is retried with a longer timeout",
		func(ctx context.Context, k *kit) error {
			d, err := ask(ctx, k, &recoveryv1.DecideRequest{Error: failure(typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT), Stage: "action",
				State: &recoveryv1.RecoveryState{RunId: k.id("run"), ToolName: "calculator", TimeoutMs: 1000, Idempotent: true}})
			if err != nil {
				return err
			}
			if d.GetStrategy() != recoveryv1.Strategy_STRATEGY_RETRY || d.GetModifiedAction().GetTimeoutMs() <= 1000 {
				return fmt.Errorf("strategy %s with timeout_ms %d, want STRATEGY_RETRY with more than 1000", d.GetStrategy(), d.GetModifiedAction().GetTimeoutMs())
			}
			return nil
		}},
	{"timeout-not-idempotent", "a timed-out tool that is not idempotent is not retried (it may have had its effect)",
		func(ctx context.Context, k *kit) error {
			d, err := ask(ctx, k, &recoveryv1.DecideRequest{Error: failure(typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT), Stage: "action",
				State: &recoveryv1.RecoveryState{RunId: k.id("run"), ToolName: "send_email", TimeoutMs: 1000}})
			if err != nil {
				return err
			}
			if d.GetStrategy() == recoveryv1.Strategy_STRATEGY_RETRY {
				return fmt.Errorf("STRATEGY_RETRY with timeout_ms %d of a tool that is not idempotent: running it again could repeat its effect", d.GetModifiedAction().GetTimeoutMs())
			}
			return nil
		}},
	{"retry-budget", "after 3 retries (the default budget) a timed-out tool is not retried again",
		func(ctx context.Context, k *kit) error {
			d, err := ask(ctx, k, &recoveryv1.DecideRequest{Error: failure(typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT), Stage: "action", RetryCount: 3,
				State: &recoveryv1.RecoveryState{RunId: k.id("run"), ToolName: "calculator", TimeoutMs: 1000, Idempotent: true}})
			if err != nil {
				return err
			}
			if d.GetStrategy() == recoveryv1.Strategy_STRATEGY_RETRY {
				return fmt.Errorf("STRATEGY_RETRY after 3 retries, the contract allows 3")
			}
			return nil
		}},
	{"retry-budget-of-state", "with state.max_retries 1, a timed-out tool retried once is not retried again (the orchestrator retries a timeout once)",
		func(ctx context.Context, k *kit) error {
			d, err := ask(ctx, k, &recoveryv1.DecideRequest{Error: failure(typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT), Stage: "action", RetryCount: 1,
				State: &recoveryv1.RecoveryState{RunId: k.id("run"), ToolName: "calculator", TimeoutMs: 2000, Idempotent: true, MaxRetries: 1}})
			if err != nil {
				return err
			}
			if d.GetStrategy() == recoveryv1.Strategy_STRATEGY_RETRY {
				return fmt.Errorf("STRATEGY_RETRY after 1 retry, and state.max_retries is 1")
			}
			return nil
		}},
	{"alternative-tool", "a tool error with an alternative configured falls back to that alternative",
		func(ctx context.Context, k *kit) error {
			d, err := ask(ctx, k, &recoveryv1.DecideRequest{Error: failure(typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR), Stage: "action",
				State: &recoveryv1.RecoveryState{RunId: k.id("run"), ToolName: "calculator", AlternativeTools: []string{"abacus"}}})
			if err != nil {
				return err
			}
			if d.GetStrategy() != recoveryv1.Strategy_STRATEGY_FALLBACK || d.GetModifiedAction().GetToolName() != "abacus" {
				return fmt.Errorf("strategy %s with tool %q, want STRATEGY_FALLBACK to abacus", d.GetStrategy(), d.GetModifiedAction().GetToolName())
			}
			return nil
		}},
	{"unknown-asks-user", "an unknown failure asks the user for guidance",
		decide(failure(typev1.StageErrorCode_STAGE_ERROR_CODE_UNSPECIFIED), "action", 0, &recoveryv1.RecoveryState{ToolName: "calculator"},
			recoveryv1.Strategy_STRATEGY_ASK_USER)},
	{"missing-error", "a request without error is INVALID_ARGUMENT naming error",
		func(ctx context.Context, k *kit) error {
			_, err := recoveryv1.NewRecoveryServiceClient(k.conn).Decide(ctx, &recoveryv1.DecideRequest{Stage: "action"})
			return wantInvalid(err, "error")
		}},
	{"missing-stage", "a request without stage is INVALID_ARGUMENT naming stage",
		func(ctx context.Context, k *kit) error {
			_, err := recoveryv1.NewRecoveryServiceClient(k.conn).Decide(ctx, &recoveryv1.DecideRequest{
				Error: failure(typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR)})
			return wantInvalid(err, "stage")
		}},
	{"stage-over-limit", "a stage of 65 bytes is INVALID_ARGUMENT naming stage",
		func(ctx context.Context, k *kit) error {
			_, err := recoveryv1.NewRecoveryServiceClient(k.conn).Decide(ctx, &recoveryv1.DecideRequest{
				Error: failure(typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR), Stage: strings.Repeat("s", 65)})
			return wantInvalid(err, "stage")
		}},
	{"run-id-over-limit", "a state.run_id of 129 bytes is INVALID_ARGUMENT naming state.run_id",
		func(ctx context.Context, k *kit) error {
			_, err := recoveryv1.NewRecoveryServiceClient(k.conn).Decide(ctx, &recoveryv1.DecideRequest{
				Error: failure(typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR), Stage: "action",
				State: &recoveryv1.RecoveryState{RunId: strings.Repeat("r", 129)}})
			return wantInvalid(err, "state.run_id")
		}},
	{"target-name-over-limit", "a target's model of 257 bytes is INVALID_ARGUMENT naming state.targets",
		func(ctx context.Context, k *kit) error {
			_, err := recoveryv1.NewRecoveryServiceClient(k.conn).Decide(ctx, &recoveryv1.DecideRequest{
				Error: generationFailure(typev1.ErrorClass_ERROR_CLASS_SERVER), Stage: "generation",
				State: &recoveryv1.RecoveryState{RunId: k.id("run"), Target: targetA, Targets: []*typev1.Target{targetA, {Provider: "b", Model: strings.Repeat("m", 257)}}}})
			return wantInvalid(err, "state.targets")
		}},
	{"negative-retry-count", "a negative retry_count is INVALID_ARGUMENT naming retry_count",
		func(ctx context.Context, k *kit) error {
			_, err := recoveryv1.NewRecoveryServiceClient(k.conn).Decide(ctx, &recoveryv1.DecideRequest{
				Error: failure(typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR), Stage: "action", RetryCount: -1})
			return wantInvalid(err, "retry_count")
		}},
}

// isRetry says whether d tries the action again, as it was or changed: retry or fallback.
func isRetry(d *recoveryv1.DecideResponse) bool {
	return d.GetStrategy() == recoveryv1.Strategy_STRATEGY_RETRY || d.GetStrategy() == recoveryv1.Strategy_STRATEGY_FALLBACK
}

func failure(code typev1.StageErrorCode) *typev1.StageError {
	return &typev1.StageError{Code: code, Message: "something failed"}
}

func generationFailure(class typev1.ErrorClass) *typev1.StageError {
	return &typev1.StageError{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_GENERATION_FAILED, ErrorClass: class, Message: "the provider failed"}
}

// decide is a case whose decision must have one of the strategies.
func decide(e *typev1.StageError, stage string, retries int32, state *recoveryv1.RecoveryState, strategies ...recoveryv1.Strategy) func(context.Context, *kit) error {
	return func(ctx context.Context, k *kit) error {
		d, err := ask(ctx, k, &recoveryv1.DecideRequest{Error: e, Stage: stage, RetryCount: retries, State: state})
		if err != nil {
			return err
		}
		if !slices.Contains(strategies, d.GetStrategy()) {
			return fmt.Errorf("strategy %s, want %v", d.GetStrategy(), strategies)
		}
		return nil
	}
}

// nextTargetAtOnce checks the decision on a model request of target A that failed with class,
// the run's targets A and B: try again, on B, without waiting (seed 000 §3: "Retry with next
// provider/model target immediately ... No backoff delay"; rate limits cycle to the next
// target and wait only once every target is limited).
func nextTargetAtOnce(class typev1.ErrorClass) func(context.Context, *kit) error {
	return func(ctx context.Context, k *kit) error {
		d, err := ask(ctx, k, &recoveryv1.DecideRequest{Error: generationFailure(class), Stage: "generation",
			State: &recoveryv1.RecoveryState{RunId: k.id("run"), Target: targetA, Targets: []*typev1.Target{targetA, targetB}}})
		if err != nil {
			return err
		}
		var p problems
		if s := d.GetStrategy(); s != recoveryv1.Strategy_STRATEGY_RETRY && s != recoveryv1.Strategy_STRATEGY_FALLBACK {
			p.addf("strategy %s, want STRATEGY_RETRY or STRATEGY_FALLBACK", s)
		}
		if t := d.GetModifiedAction().GetTarget(); t.GetProvider() != targetB.GetProvider() || t.GetModel() != targetB.GetModel() {
			p.addf("target %s/%s, want the next one, %s/%s", t.GetProvider(), t.GetModel(), targetB.GetProvider(), targetB.GetModel())
		}
		if b := d.GetBackoffMs(); b != 0 {
			p.addf("backoff_ms %d, want 0", b)
		}
		return p.err()
	}
}

// ask asks for a decision and checks what every decision keeps: a strategy, a user message,
// and a backoff between 0 and 60 s.
func ask(ctx context.Context, k *kit, req *recoveryv1.DecideRequest) (*recoveryv1.DecideResponse, error) {
	d, err := recoveryv1.NewRecoveryServiceClient(k.conn).Decide(ctx, req)
	if err != nil {
		return nil, wantOK(err)
	}
	var p problems
	if d.GetStrategy() == recoveryv1.Strategy_STRATEGY_UNSPECIFIED || recoveryv1.Strategy_name[int32(d.GetStrategy())] == "" {
		p.addf("strategy %s, want retry, fallback, abort or ask_user", d.GetStrategy())
	}
	if d.GetUserMessage() == "" {
		p.addf("no user_message (a decision always has one)")
	}
	if b := d.GetBackoffMs(); b < 0 || b > maxBackoffMs {
		p.addf("backoff_ms %d, want 0 to %d", b, maxBackoffMs)
	}
	return d, p.err()
}
