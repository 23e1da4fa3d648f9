package recovery_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/recovery"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The decision-engine contract's canned messages, verbatim.
const (
	cannedLLMFailure  = "I'm having trouble processing your request. Please try again."
	cannedRateLimited = "I'm receiving too many requests. Please wait a moment."
	cannedTooComplex  = "That request is too complex. Could you break it into smaller steps?"
	cannedTooLong     = "This conversation has become too long for me to continue. Please start a new one or shorten your request."
)

const (
	retry    = recoveryv1.Strategy_STRATEGY_RETRY
	fallback = recoveryv1.Strategy_STRATEGY_FALLBACK
	abort    = recoveryv1.Strategy_STRATEGY_ABORT
	askUser  = recoveryv1.Strategy_STRATEGY_ASK_USER
)

func client(t *testing.T, opts recovery.Options) recoveryv1.RecoveryServiceClient {
	t.Helper()
	return recoveryv1.NewRecoveryServiceClient(grpctest.Serve(t, recovery.New(opts).Register))
}

func target(name string) *typev1.Target {
	return &typev1.Target{Provider: name, Model: name + "-model"}
}

// runState is a run with three targets, a failed idempotent tool with two alternatives and
// arguments.
func runState(t *testing.T) *recoveryv1.RecoveryState {
	t.Helper()
	args, err := structpb.NewStruct(map[string]any{"expression": "2+2"})
	if err != nil {
		t.Fatal(err)
	}
	return &recoveryv1.RecoveryState{
		RunId:            "run-1",
		ToolName:         "calculator",
		TimeoutMs:        10_000,
		Target:           target("a"),
		Targets:          []*typev1.Target{target("a"), target("b"), target("c")},
		AlternativeTools: []string{"calculator_v2", "python"},
		Arguments:        args,
		Idempotent:       true,
	}
}

func decide(t *testing.T, c recoveryv1.RecoveryServiceClient, e *typev1.StageError, retries int32, state *recoveryv1.RecoveryState) *recoveryv1.DecideResponse {
	t.Helper()
	resp, err := c.Decide(t.Context(), &recoveryv1.DecideRequest{Error: e, Stage: "generation", RetryCount: retries, State: state})
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	if resp.GetUserMessage() == "" {
		t.Error("user_message is empty")
	}
	if !strings.Contains(resp.GetReason(), stageerr.CodeName(e.GetCode())) || !strings.Contains(resp.GetReason(), `"generation"`) {
		t.Errorf("reason %q does not name the failure and the stage", resp.GetReason())
	}
	return resp
}

func generation(class typev1.ErrorClass) *typev1.StageError {
	return &typev1.StageError{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_GENERATION_FAILED, ErrorClass: class}
}

// TestStrategyTable pins the decision for every failure code and every generation error
// class, first attempt, with a run that has targets, a timeout and alternative tools.
func TestStrategyTable(t *testing.T) {
	type want struct {
		strategy recoveryv1.Strategy
		backoff  int64
		action   *recoveryv1.ModifiedAction
		message  string // exact when set
	}
	next := &recoveryv1.ModifiedAction{Target: target("b")}
	state := runState(t)
	alt := &recoveryv1.ModifiedAction{ToolName: "calculator_v2", Arguments: state.GetArguments()}
	own := func(s recoveryv1.Strategy) want { return want{strategy: s} }

	codeTable := map[typev1.StageErrorCode]want{
		typev1.StageErrorCode_STAGE_ERROR_CODE_UNSPECIFIED:           own(askUser),
		typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT:         own(abort),
		typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNCLEAR:        own(askUser),
		typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNSAFE:         own(abort),
		typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN:        own(abort),
		typev1.StageErrorCode_STAGE_ERROR_CODE_PLAN_TOO_COMPLEX:      {strategy: abort, message: cannedTooComplex},
		typev1.StageErrorCode_STAGE_ERROR_CODE_CONTEXT_OVERFLOW:      own(abort),
		typev1.StageErrorCode_STAGE_ERROR_CODE_MEMORY_UNAVAILABLE:    own(fallback),
		typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_TOOL_CALL:     own(fallback),
		typev1.StageErrorCode_STAGE_ERROR_CODE_MAX_TOKENS_EXCEEDED:   own(abort),
		typev1.StageErrorCode_STAGE_ERROR_CODE_TOOL_NOT_FOUND:        own(fallback),
		typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_ARGUMENTS:     own(fallback),
		typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT:     {strategy: retry, backoff: 500, action: &recoveryv1.ModifiedAction{TimeoutMs: 20_000}},
		typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR:       {strategy: fallback, action: alt},
		typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED:     own(abort),
		typev1.StageErrorCode_STAGE_ERROR_CODE_PARSE_ERROR:           own(abort),
		typev1.StageErrorCode_STAGE_ERROR_CODE_OBSERVATION_TOO_LARGE: {strategy: askUser, message: "A tool returned more data than I can read. How would you like me to proceed?"},
		typev1.StageErrorCode_STAGE_ERROR_CODE_MEMORY_FULL:           own(abort),
		typev1.StageErrorCode_STAGE_ERROR_CODE_STORAGE_ERROR:         own(fallback),
		typev1.StageErrorCode_STAGE_ERROR_CODE_APPROVAL_TIMEOUT:      own(fallback),
		typev1.StageErrorCode_STAGE_ERROR_CODE_USER_REJECTED:         own(fallback),
		typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND:             own(askUser),
		typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION:   own(askUser),
		typev1.StageErrorCode_STAGE_ERROR_CODE_UNAVAILABLE:           {strategy: retry, backoff: 500},
		typev1.StageErrorCode_STAGE_ERROR_CODE_ALREADY_EXISTS:        own(abort),
		typev1.StageErrorCode_STAGE_ERROR_CODE_UNAUTHENTICATED:       own(abort),
		typev1.StageErrorCode_STAGE_ERROR_CODE_RESOURCE_EXHAUSTED:    own(abort),
		999: own(askUser),
	}
	classTable := map[typev1.ErrorClass]want{
		typev1.ErrorClass_ERROR_CLASS_UNSPECIFIED:      {strategy: fallback, action: next, message: cannedLLMFailure},
		typev1.ErrorClass_ERROR_CLASS_AUTH:             {strategy: abort, message: cannedLLMFailure},
		typev1.ErrorClass_ERROR_CLASS_QUOTA:            {strategy: abort, message: cannedLLMFailure},
		typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED:     {strategy: retry, action: next, message: cannedRateLimited}, // b is not rate-limited yet
		typev1.ErrorClass_ERROR_CLASS_TIMEOUT:          {strategy: fallback, action: next, message: cannedLLMFailure},
		typev1.ErrorClass_ERROR_CLASS_NETWORK:          {strategy: fallback, action: next, message: cannedLLMFailure},
		typev1.ErrorClass_ERROR_CLASS_SERVER:           {strategy: fallback, action: next, message: cannedLLMFailure},
		typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE:     {strategy: fallback, action: next, message: cannedLLMFailure},
		typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST:  {strategy: fallback, action: next, message: cannedLLMFailure},
		typev1.ErrorClass_ERROR_CLASS_CONTEXT_OVERFLOW: {strategy: fallback, action: next, message: cannedTooLong},
		99: {strategy: fallback, action: next, message: cannedLLMFailure},
	}
	if len(codeTable) != len(typev1.StageErrorCode_name) { // GENERATION_FAILED is in classTable, 999 is extra
		t.Fatalf("code table has %d rows, want one per code (%d) minus GENERATION_FAILED plus an unknown code", len(codeTable), len(typev1.StageErrorCode_name))
	}
	if len(classTable) != len(typev1.ErrorClass_name)+1 {
		t.Fatalf("class table has %d rows, want one per class (%d) plus an unknown class", len(classTable), len(typev1.ErrorClass_name))
	}

	c := client(t, recovery.Options{Rand: func() float64 { return 0.5 }})
	check := func(t *testing.T, e *typev1.StageError, w want) {
		resp := decide(t, c, e, 0, runState(t))
		if resp.GetStrategy() != w.strategy {
			t.Errorf("strategy = %v (%s), want %v", resp.GetStrategy(), resp.GetReason(), w.strategy)
		}
		if resp.GetBackoffMs() != w.backoff {
			t.Errorf("backoff_ms = %d, want %d", resp.GetBackoffMs(), w.backoff)
		}
		if !proto.Equal(resp.GetModifiedAction(), w.action) {
			t.Errorf("modified_action = %v, want %v", resp.GetModifiedAction(), w.action)
		}
		if w.message != "" && resp.GetUserMessage() != w.message {
			t.Errorf("user_message = %q, want %q", resp.GetUserMessage(), w.message)
		}
	}
	for code, w := range codeTable {
		t.Run(stageerr.CodeName(code), func(t *testing.T) { check(t, &typev1.StageError{Code: code}, w) })
	}
	for class, w := range classTable {
		t.Run("GENERATION_FAILED/"+stageerr.ClassName(class), func(t *testing.T) { check(t, generation(class), w) })
	}
}

// TestUserMessagesAreDistinctSentences checks that every decision speaks to the user in a
// sentence and that different situations are told apart.
func TestUserMessagesAreDistinctSentences(t *testing.T) {
	c := client(t, recovery.Options{})
	seen := map[string]string{}
	for code := range typev1.StageErrorCode_name {
		resp := decide(t, c, &typev1.StageError{Code: typev1.StageErrorCode(code)}, 0, runState(t))
		msg := resp.GetUserMessage()
		if !strings.HasSuffix(msg, ".") && !strings.HasSuffix(msg, "?") {
			t.Errorf("%s: user_message %q is not a sentence", stageerr.CodeName(typev1.StageErrorCode(code)), msg)
		}
		seen[msg] = stageerr.CodeName(typev1.StageErrorCode(code))
	}
	if len(seen) < 12 {
		t.Errorf("only %d distinct user messages across %d codes", len(seen), len(typev1.StageErrorCode_name))
	}
}

func TestRetryCap(t *testing.T) {
	retrying := []struct {
		err     *typev1.StageError
		gaveUp  string // exact user_message after the cap, when the contract fixes it
		initial recoveryv1.Strategy
	}{
		{generation(typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED), cannedRateLimited, retry},
		{generation(typev1.ErrorClass_ERROR_CLASS_NETWORK), cannedLLMFailure, fallback},
		{generation(typev1.ErrorClass_ERROR_CLASS_UNSPECIFIED), cannedLLMFailure, fallback},
		{&typev1.StageError{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT}, "", retry},
		{&typev1.StageError{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR}, "", fallback},
		{&typev1.StageError{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_TOOL_CALL}, "", fallback},
		{&typev1.StageError{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_MEMORY_UNAVAILABLE}, "", fallback},
	}
	budgets := []struct {
		name       string
		opts       recovery.Options
		stateLimit int32
		limit      int32
	}{
		{"default budget of 3", recovery.Options{}, 0, 3},
		{"configured budget", recovery.Options{MaxRetries: 1}, 0, 1},
		{"state budget wins", recovery.Options{MaxRetries: 1}, 5, 5},
	}
	for _, b := range budgets {
		c := client(t, recovery.Options{MaxRetries: b.opts.MaxRetries, Rand: func() float64 { return 0 }})
		for _, r := range retrying {
			t.Run(b.name+"/"+stageerr.CodeName(r.err.GetCode())+"/"+stageerr.ClassName(r.err.GetErrorClass()), func(t *testing.T) {
				state := runState(t)
				state.MaxRetries = b.stateLimit
				under := decide(t, c, r.err, b.limit-1, state)
				if under.GetStrategy() != r.initial {
					t.Errorf("retry %d of %d: strategy %v, want %v", b.limit-1, b.limit, under.GetStrategy(), r.initial)
				}
				at := decide(t, c, r.err, b.limit, state)
				if at.GetStrategy() != abort {
					t.Fatalf("retry %d of %d: strategy %v, want ABORT", b.limit, b.limit, at.GetStrategy())
				}
				if at.GetBackoffMs() != 0 || at.GetModifiedAction() != nil {
					t.Errorf("abort carries backoff %d and action %v", at.GetBackoffMs(), at.GetModifiedAction())
				}
				if !strings.Contains(at.GetReason(), fmt.Sprintf("retry limit reached (%d retries made, the limit is %d)", b.limit, b.limit)) {
					t.Errorf("reason = %q", at.GetReason())
				}
				if r.gaveUp != "" && at.GetUserMessage() != r.gaveUp {
					t.Errorf("user_message = %q, want %q", at.GetUserMessage(), r.gaveUp)
				}
			})
		}
	}
	t.Run("ask user and abort are not capped", func(t *testing.T) {
		c := client(t, recovery.Options{})
		unclear := decide(t, c, &typev1.StageError{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNCLEAR}, 10, nil)
		if unclear.GetStrategy() != askUser || strings.Contains(unclear.GetReason(), "retry limit") {
			t.Errorf("INTENT_UNCLEAR after 10 retries: %v (%s)", unclear.GetStrategy(), unclear.GetReason())
		}
		auth := decide(t, c, generation(typev1.ErrorClass_ERROR_CLASS_AUTH), 10, nil)
		if auth.GetStrategy() != abort || strings.Contains(auth.GetReason(), "retry limit") || auth.GetUserMessage() != cannedLLMFailure {
			t.Errorf("AUTH after 10 retries: %v (%s) %q", auth.GetStrategy(), auth.GetReason(), auth.GetUserMessage())
		}
	})
}

// onlyTarget is a run with the single target a: a rate limit of a rate-limits every target.
func onlyTarget() *recoveryv1.RecoveryState {
	return &recoveryv1.RecoveryState{Target: target("a"), Targets: []*typev1.Target{target("a")}}
}

func TestRateLimitBackoff(t *testing.T) {
	// Rand 0.5 is the middle of the jitter: the backoff itself.
	c := client(t, recovery.Options{MaxRetries: 1 << 30, Rand: func() float64 { return 0.5 }})
	rateLimited := generation(typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED)
	want := []int64{1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000}
	var got []int64
	for n := range int32(len(want)) {
		got = append(got, decide(t, c, rateLimited, n, onlyTarget()).GetBackoffMs())
	}
	if !slices.Equal(got, want) {
		t.Errorf("backoff sequence = %v, want %v", got, want)
	}
	if d := decide(t, c, rateLimited, 1<<30-1, onlyTarget()).GetBackoffMs(); d != 60000 {
		t.Errorf("backoff after 2^30 retries = %d, want the 60000 cap", d)
	}

	t.Run("Retry-After honoured, up to 60 s", func(t *testing.T) {
		// 18 446 744 073 710 ms is 2^64 ns and a little more: in nanoseconds it wrapped around
		// to 0.4 ms, and the stage retried at once a provider that asked for centuries.
		for after, want := range map[int64]int64{1: 1, 2500: 2500, 120_000: 60_000,
			18_446_744_073_710: 60_000, math.MaxInt64: 60_000} {
			e := generation(typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED)
			e.RetryAfterMs = after
			resp := decide(t, c, e, 4, onlyTarget())
			if resp.GetBackoffMs() != want || !strings.Contains(resp.GetReason(), "Retry-After") {
				t.Errorf("Retry-After %d ms: backoff %d (%s), want %d", after, resp.GetBackoffMs(), resp.GetReason(), want)
			}
		}
	})
	t.Run("other generation failures fall back without delay", func(t *testing.T) {
		for _, class := range []typev1.ErrorClass{typev1.ErrorClass_ERROR_CLASS_TIMEOUT, typev1.ErrorClass_ERROR_CLASS_SERVER} {
			e := generation(class)
			e.RetryAfterMs = 5000
			if d := decide(t, c, e, 2, runState(t)).GetBackoffMs(); d != 0 {
				t.Errorf("%s: backoff %d, want 0", stageerr.ClassName(class), d)
			}
		}
	})
}

// TestRateLimitBackoffIsJittered (seed 002 §8: retries of LLM calls back off exponentially
// with jitter): without a Retry-After, the wait of a rate limit spreads ±20 % around 1 s · 2^n,
// still never over 60 s, so that runs rate-limited together do not all ask again at once. It
// was exactly 1 s, 2 s, 4 s … for every run.
func TestRateLimitBackoffIsJittered(t *testing.T) {
	rateLimited := generation(typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED)
	for _, tc := range []struct {
		rand    float64
		retries int32
		want    int64
	}{
		{rand: 0, retries: 0, want: 800},
		{rand: 0.99, retries: 0, want: 1196},
		{rand: 0, retries: 2, want: 3200},
		{rand: 0.99, retries: 10, want: 60_000},
	} {
		c := client(t, recovery.Options{MaxRetries: 100, Rand: func() float64 { return tc.rand }})
		resp := decide(t, c, rateLimited, tc.retries, onlyTarget())
		if resp.GetBackoffMs() != tc.want || !strings.Contains(resp.GetReason(), "exponential backoff with jitter") {
			t.Errorf("rand %v, retry %d: backoff %d ms (%s), want %d ms of exponential backoff with jitter",
				tc.rand, tc.retries, resp.GetBackoffMs(), resp.GetReason(), tc.want)
		}
	}
	// A Retry-After is waited for as the provider said.
	withAfter := generation(typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED)
	withAfter.RetryAfterMs = 1500
	c := client(t, recovery.Options{MaxRetries: 100, Rand: func() float64 { return 0 }})
	if d := decide(t, c, withAfter, 0, onlyTarget()).GetBackoffMs(); d != 1500 {
		t.Errorf("Retry-After 1500 ms: backoff %d ms", d)
	}
}

// TestRateLimitCycle (ai-agent §3): a rate limit moves on to the next target at once while
// some target was not rate-limited in the current cycle; once every target was, the wait is
// the largest Retry-After of the cycle (capped at 60 s), or the exponential backoff when none
// was advertised, and a wait the run has no time left for aborts.
func TestRateLimitCycle(t *testing.T) {
	// Rand 0.5 is the middle of the jitter: the backoff itself.
	c := client(t, recovery.Options{MaxRetries: 10, Rand: func() float64 { return 0.5 }})
	limited := func(name string, afterMS int64) *recoveryv1.RateLimitedTarget {
		return &recoveryv1.RateLimitedTarget{Target: target(name), RetryAfterMs: afterMS}
	}
	abc := []*typev1.Target{target("a"), target("b"), target("c")}
	for _, tc := range []struct {
		name       string
		failed     string
		afterMS    int64
		cycle      []*recoveryv1.RateLimitedTarget
		rejected   []*typev1.Target
		timeLeftMS int64
		retries    int32
		strategy   recoveryv1.Strategy
		wait       int64
		next       string
		reason     string
	}{
		{name: "first of the cycle: next target at once", failed: "a", afterMS: 5000, strategy: retry, next: "b",
			reason: "a target not yet rate-limited in this cycle is tried at once"},
		{name: "c is still untried", failed: "b", afterMS: 5000, cycle: []*recoveryv1.RateLimitedTarget{limited("a", 9000)},
			strategy: retry, next: "c"},
		{name: "every target limited: the cycle's largest Retry-After", failed: "c", afterMS: 1000,
			cycle: []*recoveryv1.RateLimitedTarget{limited("a", 3000), limited("b", 2000)}, strategy: retry, wait: 3000, next: "a",
			reason: "every target is rate-limited in this cycle: wait 3000 ms, the largest Retry-After"},
		{name: "the failed target's own Retry-After counts", failed: "c", afterMS: 7000,
			cycle: []*recoveryv1.RateLimitedTarget{limited("a", 3000), limited("b", 0)}, strategy: retry, wait: 7000, next: "a"},
		{name: "no Retry-After: exponential backoff", failed: "c", retries: 2,
			cycle: []*recoveryv1.RateLimitedTarget{limited("a", 0), limited("b", 0)}, strategy: retry, wait: 4000, next: "a",
			reason: "every target is rate-limited in this cycle: wait 4000 ms (exponential backoff with jitter)"},
		{name: "capped at 60 s", failed: "c", afterMS: 90_000, cycle: []*recoveryv1.RateLimitedTarget{limited("a", 0), limited("b", 0)},
			strategy: retry, wait: 60_000, next: "a", reason: "wait 60000 ms, the largest Retry-After (90000 ms) capped"},
		{name: "a refused target needs no rate limit", failed: "b", afterMS: 1500, cycle: []*recoveryv1.RateLimitedTarget{limited("a", 1000)},
			rejected: []*typev1.Target{target("c")}, strategy: retry, wait: 1500, next: "a"},
		{name: "a wait that fits in the time left", failed: "a", afterMS: 2000, cycle: []*recoveryv1.RateLimitedTarget{limited("b", 0), limited("c", 0)},
			timeLeftMS: 2001, strategy: retry, wait: 2000, next: "b"},
		{name: "a wait the run has no time for aborts", failed: "a", afterMS: 2000, cycle: []*recoveryv1.RateLimitedTarget{limited("b", 0), limited("c", 0)},
			timeLeftMS: 2000, strategy: abort, reason: "waiting 2000 ms would outlast the run, which has 2000 ms left"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := generation(typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED)
			e.RetryAfterMs = tc.afterMS
			resp := decide(t, c, e, tc.retries, &recoveryv1.RecoveryState{
				Target: target(tc.failed), Targets: abc, RateLimited: tc.cycle, RejectedTargets: tc.rejected, TimeLeftMs: tc.timeLeftMS,
			})
			if resp.GetStrategy() != tc.strategy || resp.GetBackoffMs() != tc.wait {
				t.Errorf("%v after %d ms, want %v after %d ms (%s)", resp.GetStrategy(), resp.GetBackoffMs(), tc.strategy, tc.wait, resp.GetReason())
			}
			if tc.next != "" && !proto.Equal(resp.GetModifiedAction().GetTarget(), target(tc.next)) {
				t.Errorf("next target %v, want %s", resp.GetModifiedAction().GetTarget(), tc.next)
			}
			if tc.strategy == abort && (resp.GetModifiedAction() != nil || resp.GetUserMessage() != cannedRateLimited) {
				t.Errorf("abort with action %v, message %q", resp.GetModifiedAction(), resp.GetUserMessage())
			}
			if !strings.Contains(resp.GetReason(), tc.reason) {
				t.Errorf("reason %q lacks %q", resp.GetReason(), tc.reason)
			}
		})
	}
}

// TestRefusedTargets: a target that refused the request (INVALID_REQUEST) is never chosen
// again in the turn, whatever failed next; when every target has refused, the turn aborts.
func TestRefusedTargets(t *testing.T) {
	c := client(t, recovery.Options{MaxRetries: 10})
	invalid := generation(typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST)
	network := generation(typev1.ErrorClass_ERROR_CLASS_NETWORK)
	abc := []*typev1.Target{target("a"), target("b"), target("c")}
	for _, tc := range []struct {
		name     string
		err      *typev1.StageError
		failed   string
		targets  []*typev1.Target
		refused  []*typev1.Target
		strategy recoveryv1.Strategy
		next     string
	}{
		{name: "on to the next target", err: invalid, failed: "a", targets: abc, strategy: fallback, next: "b"},
		{name: "refused targets are skipped", err: invalid, failed: "a", targets: abc, refused: []*typev1.Target{target("b")}, strategy: fallback, next: "c"},
		{name: "another failure skips them too", err: network, failed: "c", targets: abc, refused: []*typev1.Target{target("a")}, strategy: fallback, next: "b"},
		{name: "the only open target again", err: network, failed: "b", targets: abc, refused: []*typev1.Target{target("a"), target("c")}, strategy: fallback, next: "b"},
		{name: "every target refused", err: invalid, failed: "c", targets: abc, refused: []*typev1.Target{target("a"), target("b")}, strategy: abort},
		{name: "the only target refused", err: invalid, failed: "a", targets: []*typev1.Target{target("a")}, strategy: abort},
		{name: "no list: the failed target refused", err: invalid, failed: "a", strategy: abort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := decide(t, c, tc.err, 0, &recoveryv1.RecoveryState{Target: target(tc.failed), Targets: tc.targets, RejectedTargets: tc.refused})
			if resp.GetStrategy() != tc.strategy {
				t.Fatalf("strategy %v, want %v (%s)", resp.GetStrategy(), tc.strategy, resp.GetReason())
			}
			if tc.strategy == abort {
				if resp.GetModifiedAction() != nil || !strings.Contains(resp.GetReason(), "every target refused the request") || resp.GetUserMessage() != cannedLLMFailure {
					t.Errorf("abort %v %q %q", resp.GetModifiedAction(), resp.GetReason(), resp.GetUserMessage())
				}
				return
			}
			if !proto.Equal(resp.GetModifiedAction().GetTarget(), target(tc.next)) {
				t.Errorf("next target %v, want %s", resp.GetModifiedAction().GetTarget(), tc.next)
			}
		})
	}
}

func TestNextTarget(t *testing.T) {
	abc := []*typev1.Target{target("a"), target("b"), target("c")}
	table := []struct {
		name    string
		failed  *typev1.Target
		targets []*typev1.Target
		retries int32
		want    *typev1.Target
	}{
		{"a to b", target("a"), abc, 0, target("b")},
		{"b to c", target("b"), abc, 0, target("c")},
		{"c wraps to a", target("c"), abc, 0, target("a")},
		{"position wins over retry count", target("b"), abc, 2, target("c")},
		{"single target is reused", target("a"), []*typev1.Target{target("a")}, 1, target("a")},
		{"unknown failed target: attempt 2 uses targets[1]", target("x"), abc, 0, target("b")},
		{"no failed target: attempt 3 uses targets[2]", nil, abc, 1, target("c")},
		{"no failed target: attempt 4 wraps", nil, abc, 2, target("a")},
		{"no list: the failed target again", target("x"), nil, 1, target("x")},
		{"nothing known: no change", nil, nil, 0, nil},
	}
	c := client(t, recovery.Options{MaxRetries: 10})
	for _, tc := range table {
		for _, class := range []typev1.ErrorClass{typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED, typev1.ErrorClass_ERROR_CLASS_NETWORK} {
			t.Run(tc.name+"/"+stageerr.ClassName(class), func(t *testing.T) {
				resp := decide(t, c, generation(class), tc.retries, &recoveryv1.RecoveryState{Target: tc.failed, Targets: tc.targets})
				if !proto.Equal(resp.GetModifiedAction().GetTarget(), tc.want) {
					t.Errorf("target = %v, want %v", resp.GetModifiedAction().GetTarget(), tc.want)
				}
				if tc.want == nil && resp.GetModifiedAction() != nil {
					t.Errorf("modified_action = %v, want none", resp.GetModifiedAction())
				}
			})
		}
	}
}

func TestToolTimeoutRetry(t *testing.T) {
	timeout := &typev1.StageError{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT}
	table := []struct {
		name    string
		opts    recovery.Options
		timeout int64
		want    int64
	}{
		{"doubled", recovery.Options{}, 10_000, 20_000},
		{"default base of 30 s", recovery.Options{}, 0, 60_000},
		{"capped at 5 min", recovery.Options{}, 200_000, 300_000},
		{"already at the cap", recovery.Options{}, 300_000, 300_000},
		{"over the cap is never shortened", recovery.Options{}, 600_000, 600_000},
		{"configured cap", recovery.Options{MaxToolTimeout: 45_000_000_000}, 30_000, 45_000},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			resp := decide(t, client(t, tc.opts), timeout, 0, &recoveryv1.RecoveryState{TimeoutMs: tc.timeout, Idempotent: true})
			if resp.GetStrategy() != retry || resp.GetModifiedAction().GetTimeoutMs() != tc.want {
				t.Errorf("strategy %v, timeout_ms %d, want RETRY with %d", resp.GetStrategy(), resp.GetModifiedAction().GetTimeoutMs(), tc.want)
			}
		})
	}
}

// TestTimeoutOfAToolThatIsNotIdempotent: a timed-out tool that is not idempotent may have had
// its effect, so it is never run again: the model is told, whatever the retry count.
func TestTimeoutOfAToolThatIsNotIdempotent(t *testing.T) {
	c := client(t, recovery.Options{})
	timeout := &typev1.StageError{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT}
	for _, state := range []*recoveryv1.RecoveryState{nil, {ToolName: "send_mail", TimeoutMs: 10_000}} {
		resp := decide(t, c, timeout, 0, state)
		if resp.GetStrategy() != fallback || resp.GetModifiedAction() != nil || resp.GetBackoffMs() != 0 ||
			!strings.Contains(resp.GetReason(), "not idempotent") {
			t.Errorf("state %v: %v %v %d (%s), want FALLBACK without a change or a wait", state, resp.GetStrategy(),
				resp.GetModifiedAction(), resp.GetBackoffMs(), resp.GetReason())
		}
	}
}

func TestToolRetryJitter(t *testing.T) {
	timeout := &typev1.StageError{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT}
	idempotent := &recoveryv1.RecoveryState{Idempotent: true}
	table := []struct {
		rand float64
		want []int64 // for retry_count 0, 1, 2
	}{
		{0, []int64{400, 800, 1600}},
		{0.5, []int64{500, 1000, 2000}},
		{0.99999, []int64{599, 1199, 2399}},
		{-3, []int64{400, 800, 1600}}, // out of range: clamped
		{7, []int64{600, 1200, 2400}},
	}
	for _, tc := range table {
		t.Run(fmt.Sprint(tc.rand), func(t *testing.T) {
			c := client(t, recovery.Options{MaxRetries: 100, Rand: func() float64 { return tc.rand }})
			var got []int64
			for n := range int32(3) {
				got = append(got, decide(t, c, timeout, n, idempotent).GetBackoffMs())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("backoff = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("capped at 60 s", func(t *testing.T) {
		c := client(t, recovery.Options{MaxRetries: 100, Rand: func() float64 { return 0.99 }})
		if d := decide(t, c, timeout, 20, idempotent).GetBackoffMs(); d != 60_000 {
			t.Errorf("backoff after 20 retries = %d, want 60000", d)
		}
	})
	t.Run("default source stays within ±20 %", func(t *testing.T) {
		c := client(t, recovery.Options{MaxRetries: 100})
		for range 100 {
			if d := decide(t, c, timeout, 1, idempotent).GetBackoffMs(); d < 800 || d > 1200 {
				t.Fatalf("backoff %d outside [800, 1200]", d)
			}
		}
	})
}

func TestExecutionErrorAlternatives(t *testing.T) {
	execErr := &typev1.StageError{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR}
	c := client(t, recovery.Options{MaxRetries: 10})
	state := runState(t)
	for n, want := range []string{"calculator_v2", "python", "calculator_v2"} {
		resp := decide(t, c, execErr, int32(n), state)
		if resp.GetStrategy() != fallback || resp.GetModifiedAction().GetToolName() != want {
			t.Errorf("retry %d: %v tool %q, want FALLBACK to %q", n, resp.GetStrategy(), resp.GetModifiedAction().GetToolName(), want)
		}
		if !proto.Equal(resp.GetModifiedAction().GetArguments(), state.GetArguments()) {
			t.Errorf("retry %d: arguments %v, want the failed call's %v", n, resp.GetModifiedAction().GetArguments(), state.GetArguments())
		}
	}
	state.AlternativeTools = nil
	resp := decide(t, c, execErr, 0, state)
	if resp.GetStrategy() != fallback || resp.GetModifiedAction() != nil {
		t.Errorf("without alternatives: %v with action %v, want FALLBACK without action", resp.GetStrategy(), resp.GetModifiedAction())
	}
	if !strings.Contains(resp.GetReason(), "no alternative tool; the failure is reported to the model") {
		t.Errorf("reason = %q", resp.GetReason())
	}
}

func TestDecideInvalidInput(t *testing.T) {
	someErr := &typev1.StageError{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR}
	table := []struct {
		name     string
		req      *recoveryv1.DecideRequest
		contains string
	}{
		{"missing error", &recoveryv1.DecideRequest{Stage: "action"}, "error is required"},
		{"empty stage", &recoveryv1.DecideRequest{Error: someErr}, "stage must not be empty"},
		{"blank stage", &recoveryv1.DecideRequest{Error: someErr, Stage: "  "}, "stage must not be empty"},
		{"negative retry count", &recoveryv1.DecideRequest{Error: someErr, Stage: "action", RetryCount: -1}, "retry_count must not be negative, got -1"},
		{"negative max_retries", &recoveryv1.DecideRequest{Error: someErr, Stage: "action", State: &recoveryv1.RecoveryState{MaxRetries: -2}}, "state.max_retries must not be negative, got -2"},
		{"negative timeout", &recoveryv1.DecideRequest{Error: someErr, Stage: "action", State: &recoveryv1.RecoveryState{TimeoutMs: -5}}, "state.timeout_ms must not be negative, got -5"},
		{"negative time left", &recoveryv1.DecideRequest{Error: someErr, Stage: "action", State: &recoveryv1.RecoveryState{TimeLeftMs: -1}}, "state.time_left_ms must not be negative, got -1"},
		{"negative Retry-After", &recoveryv1.DecideRequest{Error: someErr, Stage: "generation", State: &recoveryv1.RecoveryState{
			RateLimited: []*recoveryv1.RateLimitedTarget{{RetryAfterMs: 5}, {RetryAfterMs: -5}},
		}}, "state.rate_limited[1].retry_after_ms must not be negative, got -5"},
		// The failure's own Retry-After joins the cycle's: a negative one was taken as none.
		{"negative Retry-After of the failure", &recoveryv1.DecideRequest{Stage: "generation", Error: &typev1.StageError{
			Code: typev1.StageErrorCode_STAGE_ERROR_CODE_GENERATION_FAILED, ErrorClass: typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED,
			RetryAfterMs: -5,
		}}, "error.retry_after_ms must not be negative, got -5"},
		// The stage is quoted in the decision's reason; the run id is logged with it.
		{"stage over 64 bytes", &recoveryv1.DecideRequest{Error: someErr, Stage: strings.Repeat("s", 65)}, "stage: at most 64 bytes, got 65"},
		{"run id over 128 bytes", &recoveryv1.DecideRequest{Error: someErr, Stage: "action", State: &recoveryv1.RecoveryState{RunId: strings.Repeat("r", 129)}},
			"state.run_id: run id is 129 bytes long; at most 128 are allowed"},
		{"run id with a dot", &recoveryv1.DecideRequest{Error: someErr, Stage: "action", State: &recoveryv1.RecoveryState{RunId: "run.1"}},
			`state.run_id: run id "run.1" contains '.' at byte 3`},
		// Target and tool names are quoted in the decision's reason ("next target p/m",
		// "alternative tool %q"): the generation stage's and the action stage's limits.
		{"target's model over 256 bytes", &recoveryv1.DecideRequest{Error: someErr, Stage: "generation", State: &recoveryv1.RecoveryState{
			Target: &typev1.Target{Provider: "a", Model: strings.Repeat("m", 257)}}}, "state.target.model: at most 256 bytes, got 257"},
		{"a target's provider over 256 bytes", &recoveryv1.DecideRequest{Error: someErr, Stage: "generation", State: &recoveryv1.RecoveryState{
			Targets: []*typev1.Target{target("a"), {Provider: strings.Repeat("p", 257), Model: "m"}}}}, "state.targets[1].provider: at most 256 bytes, got 257"},
		{"fallback model over 256 bytes", &recoveryv1.DecideRequest{Error: someErr, Stage: "generation", State: &recoveryv1.RecoveryState{
			FallbackTarget: &typev1.Target{Provider: "a", Model: strings.Repeat("m", 257)}}}, "state.fallback_target.model: at most 256 bytes, got 257"},
		// A target names a provider and a model (the generation stage's rule): one without
		// either was proposed as the next target or the fallback model, "next target /".
		{"a target without a model", &recoveryv1.DecideRequest{Error: someErr, Stage: "generation", State: &recoveryv1.RecoveryState{
			Targets: []*typev1.Target{target("a"), {Provider: "b"}}}}, "state.targets[1] needs both provider and model"},
		{"an empty fallback target", &recoveryv1.DecideRequest{Error: someErr, Stage: "generation", State: &recoveryv1.RecoveryState{
			FallbackTarget: &typev1.Target{}}}, "state.fallback_target needs both provider and model"},
		{"alternative tool over 512 bytes", &recoveryv1.DecideRequest{Error: someErr, Stage: "action", State: &recoveryv1.RecoveryState{
			AlternativeTools: []string{"python", strings.Repeat("t", 513)}}}, "state.alternative_tools[1]: at most 512 bytes, got 513"},
	}
	c := client(t, recovery.Options{})
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Decide(t.Context(), tc.req)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("code = %v (%v), want InvalidArgument", status.Code(err), err)
			}
			se := stageerr.FromError(err)
			if se.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT || !strings.Contains(se.Msg, tc.contains) {
				t.Errorf("error = %v %q, want INVALID_INPUT containing %q", se.Code, se.Msg, tc.contains)
			}
		})
	}
}

// TestFallbackModel (seed 003: LLM error → fallback to a simpler model): a generation failure
// that would end the turn — attempts spent, a fatal class, every target refusing, the last
// attempt — falls back to the run's fallback target for one attempt, unless the fallback
// target is what failed; without one configured, or for other failures, nothing changes.
func TestFallbackModel(t *testing.T) {
	c := client(t, recovery.Options{})
	simple := &typev1.Target{Provider: "local", Model: "small"}
	network := generation(typev1.ErrorClass_ERROR_CLASS_NETWORK)
	state := func(change func(*recoveryv1.RecoveryState)) *recoveryv1.RecoveryState {
		s := &recoveryv1.RecoveryState{Target: target("a"), Targets: []*typev1.Target{target("a"), target("b")}, FallbackTarget: simple}
		change(s)
		return s
	}
	keep := func(*recoveryv1.RecoveryState) {}
	for _, tc := range []struct {
		name    string
		err     *typev1.StageError
		retries int32
		state   *recoveryv1.RecoveryState
		want    recoveryv1.Strategy
		target  *typev1.Target
	}{
		{"attempts left: the next target", network, 0, state(keep), fallback, target("b")},
		{"last attempt", network, 1, state(func(s *recoveryv1.RecoveryState) { s.LastAttempt = true }), fallback, simple},
		{"last attempt without a fallback", network, 1, state(func(s *recoveryv1.RecoveryState) { s.LastAttempt, s.FallbackTarget = true, nil }), abort, nil},
		{"retry budget spent", network, 3, state(keep), fallback, simple},
		{"fatal class", generation(typev1.ErrorClass_ERROR_CLASS_AUTH), 0, state(keep), fallback, simple},
		{"every target refused", generation(typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST), 0,
			state(func(s *recoveryv1.RecoveryState) { s.RejectedTargets = []*typev1.Target{target("b")} }), fallback, simple},
		{"the fallback failed", network, 0, state(func(s *recoveryv1.RecoveryState) { s.Target, s.LastAttempt = simple, true }), abort, nil},
		{"not a generation failure", &typev1.StageError{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT}, 0, state(keep), abort, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := decide(t, c, tc.err, tc.retries, tc.state)
			if resp.GetStrategy() != tc.want || !proto.Equal(resp.GetModifiedAction().GetTarget(), tc.target) {
				t.Fatalf("%v to %v (%s), want %v to %v", resp.GetStrategy(), resp.GetModifiedAction().GetTarget(), resp.GetReason(), tc.want, tc.target)
			}
			if tc.target == simple && (resp.GetBackoffMs() != 0 || resp.GetUserMessage() != cannedLLMFailure || !strings.Contains(resp.GetReason(), "simpler model local/small")) {
				t.Errorf("fallback %d ms, %q, %q", resp.GetBackoffMs(), resp.GetUserMessage(), resp.GetReason())
			}
		})
	}
}
