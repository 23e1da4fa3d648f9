package mesh_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/services/memory"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestListTools(t *testing.T) {
	h := start(t, nil)
	resp, err := h.client.ListTools(t.Context(), &agentv1.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range resp.GetTools() {
		names = append(names, tool.GetName())
		if tool.GetInputSchema().GetFields()["type"].GetStringValue() != "object" {
			t.Errorf("%s has no object schema: %v", tool.GetName(), tool.GetInputSchema())
		}
	}
	if !slices.Equal(names, []string{"calculator", "current_time", "knowledge_search"}) {
		t.Errorf("tools %v", names)
	}
}

func TestDecide(t *testing.T) {
	cfg := config.Default()
	cfg.Tools.RequireApproval = []string{"current_time"}
	h := start(t, cfg) // the built-in rules model
	tests := []struct {
		name string
		req  *agentv1.DecideRequest
		want typev1.DecisionType
		text string
		tool string
	}{
		{"greeting", &agentv1.DecideRequest{Message: "Hello"}, typev1.DecisionType_DECISION_TYPE_RESPOND_ONLY, "rules model", ""},
		{"tool", &agentv1.DecideRequest{Message: "What is 6 times 7?"}, typev1.DecisionType_DECISION_TYPE_INVOKE_TOOL, "", "calculator"},
		{"tool needing approval", &agentv1.DecideRequest{Message: "What time is it?"}, typev1.DecisionType_DECISION_TYPE_REQUEST_CONFIRMATION, "", "current_time"},
		{"vague", &agentv1.DecideRequest{Message: "help"}, typev1.DecisionType_DECISION_TYPE_ASK_CLARIFICATION, "", ""},
		{"confirmed", &agentv1.DecideRequest{Message: "yes, go ahead", PendingConfirmation: &typev1.PendingAction{
			ToolCalls: []*typev1.ToolCall{{Id: "c1", Name: "current_time"}}}}, typev1.DecisionType_DECISION_TYPE_INVOKE_TOOL, "", "current_time"},
		{"declined", &agentv1.DecideRequest{Message: "no", PendingConfirmation: &typev1.PendingAction{
			ToolCalls: []*typev1.ToolCall{{Id: "c1", Name: "current_time"}}}}, typev1.DecisionType_DECISION_TYPE_RESPOND_ONLY, "won't", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := h.client.Decide(t.Context(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if d.GetDecisionType() != tc.want {
				t.Fatalf("decision %v, want %v (%v)", d.GetDecisionType(), tc.want, d)
			}
			if tc.text != "" && !strings.Contains(d.GetResponseText(), tc.text) {
				t.Errorf("response %q lacks %q", d.GetResponseText(), tc.text)
			}
			if tc.tool != "" && (len(d.GetToolCalls()) != 1 || d.GetToolCalls()[0].GetName() != tc.tool) {
				t.Errorf("tool calls %v, want %s", d.GetToolCalls(), tc.tool)
			}
			if tc.want == typev1.DecisionType_DECISION_TYPE_REQUEST_CONFIRMATION && len(d.GetPendingAction().GetToolCalls()) != 1 {
				t.Errorf("pending action %v", d.GetPendingAction())
			}
			if tc.want == typev1.DecisionType_DECISION_TYPE_ASK_CLARIFICATION && d.GetClarificationQuestion() == "" {
				t.Error("no clarification question")
			}
		})
	}
}

// TestDecideCannedMessages: provider failures become seed 004's canned answers.
func TestDecideCannedMessages(t *testing.T) {
	h := start(t, nil,
		llmtest.Scenario{Name: "auth", Match: "Tell me a joke", Turns: []llmtest.Turn{{Failure: llmtest.FailAuthError}}},
		llmtest.Scenario{Name: "rate", Match: "Tell me a story", Turns: []llmtest.Turn{{Failure: llmtest.FailRateLimit, RetryAfterMS: 10}}},
	)
	for msg, want := range map[string]string{
		"Tell me a joke":  "I'm having trouble processing your request. Please try again.",
		"Tell me a story": "I'm receiving too many requests. Please wait a moment.",
	} {
		d, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: msg})
		if err != nil {
			t.Fatal(err)
		}
		if d.GetDecisionType() != typev1.DecisionType_DECISION_TYPE_RESPOND_ONLY || d.GetResponseText() != want {
			t.Errorf("%q: %v %q, want %q", msg, d.GetDecisionType(), d.GetResponseText(), want)
		}
	}
	// The auth failure is fatal: one request only; the rate limit is retried over max_retries.
	var joke, story int
	for _, r := range h.llm.Requests() {
		switch string(r.Messages[1].Content) {
		case `"Tell me a joke"`, "Tell me a joke":
			joke++
		default:
			story++
		}
	}
	if joke != 1 || story != 3 {
		t.Errorf("requests: auth %d (want 1), rate limited %d (want 3)", joke, story)
	}
}

// TestDecideFallsBackToTheSimplerModel: a Decide whose attempts on the targets all fail gives
// the configured models.fallback one more attempt, its last, as a run's turn does (seed 003:
// LLM error → fallback to a simpler model), and decides on its answer; it answered the canned
// failure message without asking the fallback model.
func TestDecideFallsBackToTheSimplerModel(t *testing.T) {
	small := llmtest.New(t, llmtest.Scenario{Name: "rescue", Match: "Are you there?", Turns: []llmtest.Turn{text("The small model answers.")}})
	h := startWith(t, nil, func(cfg *config.Config, _ string) {
		cfg.Providers["small"] = config.Provider{Type: "openai", BaseURL: small.URL(), APIKey: "test-key"}
		cfg.Models.Fallback = &config.Target{Provider: "small", Model: "small-model"}
	}, llmtest.Scenario{Name: "down", Match: "Are you there?", Turns: []llmtest.Turn{{Failure: llmtest.FailModelError}}})
	d, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "Are you there?"})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetDecisionType() != typev1.DecisionType_DECISION_TYPE_RESPOND_ONLY || d.GetResponseText() != "The small model answers." {
		t.Fatalf("decision %v %q, want the fallback model's answer", d.GetDecisionType(), d.GetResponseText())
	}
	var used []string
	for _, e := range d.GetAccounting() {
		if e.GetStage() == "" {
			used = append(used, e.GetProvider()+"/"+strings.TrimPrefix(e.GetStatus().String(), "ACCOUNTING_STATUS_"))
		}
	}
	if want := []string{"scripted/FAILED", "scripted/FAILED", "scripted/FAILED", "small/OK"}; !slices.Equal(used, want) {
		t.Errorf("accounting %v, want %v", used, want)
	}
}

// TestDecideWaitsOutARateLimit: a rate-limited model request of Decide is tried again after
// the Retry-After the provider asked for, as a run's inference does, not at once.
func TestDecideWaitsOutARateLimit(t *testing.T) {
	const retryAfter = time.Second
	h := start(t, nil, llmtest.Scenario{Name: "limited", Match: "Say hello", Turns: []llmtest.Turn{
		{FailuresBeforeSuccess: 1, Failure: llmtest.FailRateLimit, RetryAfterMS: int(retryAfter.Milliseconds()), Content: "Hello!"},
	}})
	began := time.Now()
	d, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "Say hello"})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetResponseText() != "Hello!" {
		t.Fatalf("decision %v %q, want the answer of the second request", d.GetDecisionType(), d.GetResponseText())
	}
	if waited := time.Since(began); waited < retryAfter {
		t.Errorf("Decide answered after %v: it did not wait the Retry-After of %v", waited, retryAfter)
	}
	var statuses []string
	for _, e := range d.GetAccounting() {
		if e.GetStage() == "" {
			statuses = append(statuses, strings.TrimPrefix(e.GetStatus().String(), "ACCOUNTING_STATUS_"))
		}
	}
	if !slices.Equal(statuses, []string{"FAILED", "OK"}) {
		t.Errorf("accounting of the decision's requests %v, want FAILED then OK", statuses)
	}
}

// TestDecideAccountsAnAnswerCutOffBeforeAnyContent: a Decide whose model spends its output
// token limit before it writes anything (MAX_TOKENS_EXCEEDED) answers the canned message, and
// accounts the tokens the provider reported for that answer, where its failed request had none.
func TestDecideAccountsAnAnswerCutOffBeforeAnyContent(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "thinks too long", Match: "Prove it", Turns: []llmtest.Turn{
		{Reasoning: "Let me see", FinishReason: "length", Usage: &llmtest.Usage{PromptTokens: 40, CompletionTokens: 16}},
	}})
	d, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "Prove it"})
	if err != nil {
		t.Fatal(err)
	}
	var own []*typev1.AccountingEntry
	for _, e := range d.GetAccounting() {
		if e.GetStage() == "" {
			own = append(own, e)
		}
	}
	if len(own) == 0 || own[0].GetStatus() != typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED || own[0].GetTokens().GetTotal() != 56 {
		t.Errorf("accounting of the decision's requests %v, want a failed request of the 56 tokens reported first", own)
	}
	if got := d.GetUsage().GetTotal(); got != 56*int64(len(own)) {
		t.Errorf("usage %d tokens, want 56 for each of the %d requests", got, len(own))
	}
}

func TestCancelRun(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "hang", Match: "Think forever", Turns: []llmtest.Turn{{Failure: llmtest.FailTimeout}}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream, err := h.client.StreamRun(ctx, &agentv1.RunRequest{Message: "Think forever", RunId: "cancel-me"})
	if err != nil {
		t.Fatal(err)
	}
	untilTurnStarted(t, stream)
	// The run is live: GetRun says so, CancelRun ends it.
	if _, err := h.client.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: "cancel-me"}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("GetRun(live) = %v, want FAILED_PRECONDITION", err)
	}
	resp, err := h.client.CancelRun(t.Context(), &agentv1.CancelRunRequest{RunId: "cancel-me", Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.GetCancelled() || resp.GetOutcome() != typev1.Outcome_OUTCOME_INTERRUPTED {
		t.Fatalf("cancel = %v", resp)
	}
	evs := received(t, stream)
	if len(evs) == 0 {
		t.Fatal("the stream ended without run_finished")
	}
	res := evs[len(evs)-1].GetRunFinished().GetResult()
	if res.GetOutcome() != typev1.Outcome_OUTCOME_INTERRUPTED || res.GetExitReason() != "CANCELLED" {
		t.Errorf("streamed result %s %s", res.GetOutcome(), res.GetExitReason())
	}
	// Cancelling again reports the stored outcome without cancelling.
	again, err := h.client.CancelRun(t.Context(), &agentv1.CancelRunRequest{RunId: "cancel-me"})
	if err != nil || again.GetCancelled() || again.GetOutcome() != typev1.Outcome_OUTCOME_INTERRUPTED {
		t.Errorf("second cancel = %v, %v", again, err)
	}
	if _, err := h.client.CancelRun(t.Context(), &agentv1.CancelRunRequest{RunId: "never-ran"}); status.Code(err) != codes.NotFound {
		t.Errorf("cancel(unknown) = %v, want NOT_FOUND", err)
	}
}

// TestGetRunRightAfterCancel: CancelRun answers once the run's FINISHED checkpoint is stored,
// while its replica still hands the result to the memory stage; GetRun on that replica said
// the run was still running until then (every other replica read the result in the store),
// so `agentmesh cancel` then `agentmesh get` could fail. The memory stage here holds every
// SaveRun until the test lets it go.
func TestGetRunRightAfterCancel(t *testing.T) {
	saves := &heldSaves{MemoryServiceServer: memory.New(memory.Options{}), release: make(chan struct{})}
	h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{
			mesh.Memory: serveStage(t, mesh.Memory, func(g *grpc.Server) { memoryv1.RegisterMemoryServiceServer(g, saves) }),
		}
	}, llmtest.Scenario{Name: "hang", Match: "Think forever", Turns: []llmtest.Turn{{Failure: llmtest.FailTimeout}}})
	t.Cleanup(func() { close(saves.release) }) // before the mesh stops
	stream, err := h.client.StreamRun(t.Context(), &agentv1.RunRequest{Message: "Think forever", RunId: "cancel-then-get"})
	if err != nil {
		t.Fatal(err)
	}
	untilTurnStarted(t, stream)
	if resp, err := h.client.CancelRun(t.Context(), &agentv1.CancelRunRequest{RunId: "cancel-then-get"}); err != nil || !resp.GetCancelled() {
		t.Fatalf("CancelRun = %v, %v", resp, err)
	}
	res, err := h.client.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: "cancel-then-get"})
	if err != nil || res.GetOutcome() != typev1.Outcome_OUTCOME_INTERRUPTED {
		t.Errorf("GetRun right after CancelRun = %v, %v; want the INTERRUPTED result", res.GetOutcome(), err)
	}
}

// untilTurnStarted reads a run's stream up to its first turn_started.
func untilTurnStarted(t *testing.T, stream grpc.ServerStreamingClient[eventv1.RunEvent]) {
	t.Helper()
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("stream ended before the first turn: %v", err)
		}
		if ev.GetTurnStarted() != nil {
			return
		}
	}
}

// heldSaves is the memory stage, whose SaveRun waits until release is closed.
type heldSaves struct {
	memoryv1.MemoryServiceServer
	release chan struct{}
}

func (s *heldSaves) SaveRun(ctx context.Context, req *memoryv1.SaveRunRequest) (*memoryv1.SaveRunResponse, error) {
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.MemoryServiceServer.SaveRun(ctx, req)
}

func TestWatchRunReplaysFromSeq(t *testing.T) {
	h := start(t, nil)
	res := h.run(t, &agentv1.RunRequest{Message: "What is 6 times 7?"})
	all, _ := h.storedEvents(t, res.GetRunId())
	stream, err := h.client.WatchRun(t.Context(), &agentv1.WatchRunRequest{RunId: res.GetRunId(), FromSeq: 3})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, ev := range received(t, stream) {
		seqs = append(seqs, ev.GetSeq())
	}
	if len(seqs) != len(all)-3 || seqs[0] != 4 || seqs[len(seqs)-1] != uint64(len(all)) {
		t.Errorf("watched seqs %v of %d events", seqs, len(all))
	}
	unknown, err := h.client.WatchRun(t.Context(), &agentv1.WatchRunRequest{RunId: "nope"})
	if err == nil {
		_, err = unknown.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Errorf("watch(unknown) = %v, want NOT_FOUND", err)
	}
}

func TestIdempotencyKeyRunsOnce(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "once", Match: "Say hi once", Turns: []llmtest.Turn{{Content: "hi"}}})
	first := h.run(t, &agentv1.RunRequest{Message: "Say hi once", IdempotencyKey: "k1"})
	second := h.run(t, &agentv1.RunRequest{Message: "Say hi once", IdempotencyKey: "k1"})
	if first.GetRunId() != second.GetRunId() || second.GetFinalReport().GetContent() != "hi" {
		t.Errorf("second run %s %q, first %s", second.GetRunId(), second.GetFinalReport().GetContent(), first.GetRunId())
	}
	if n := len(h.llm.Requests()); n != 1 {
		t.Errorf("%d LLM requests, want 1", n)
	}
	// StreamRun with the same key replays the first run's events.
	stream, err := h.client.StreamRun(t.Context(), &agentv1.RunRequest{Message: "Say hi once", IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for {
		ev, err := stream.Recv()
		if err != nil {
			break
		}
		if ev.GetRunId() != first.GetRunId() {
			t.Fatalf("replayed event of run %s", ev.GetRunId())
		}
		kinds = append(kinds, events.Kind(ev))
	}
	if len(kinds) == 0 || kinds[len(kinds)-1] != "run_finished" {
		t.Errorf("replayed %v", kinds)
	}
}

// TestAKeyReusedForAnotherRequest: an idempotency key that started a run answers a retry of
// its request with that run, and another request with it INVALID_ARGUMENT naming the key
// (Stripe's idempotency_error): answering it with the first run's result would tell its
// caller that its own request ran. With checkpoints (the key in the store) and without (the
// key on the replica).
func TestAKeyReusedForAnotherRequest(t *testing.T) {
	for _, checkpoints := range []bool{true, false} {
		t.Run(fmt.Sprintf("checkpoints=%t", checkpoints), func(t *testing.T) {
			cfg := config.Default()
			cfg.Durability.Checkpoints = checkpoints
			h := start(t, cfg, llmtest.Scenario{Name: "hi", Match: "Say hi", Turns: []llmtest.Turn{{Content: "hi"}}},
				llmtest.Scenario{Name: "bye", Match: "Say bye", Turns: []llmtest.Turn{{Content: "bye"}}})
			first := h.run(t, &agentv1.RunRequest{Message: "Say hi", IdempotencyKey: "k"})
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "Say bye", IdempotencyKey: "k"})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "idempotency_key") ||
				!strings.Contains(status.Convert(err).Message(), first.GetRunId()) {
				t.Errorf("Run of another request with the key = %v, want INVALID_ARGUMENT naming idempotency_key and run %s", err, first.GetRunId())
			}
			stream, err := h.client.StreamRun(t.Context(), &agentv1.RunRequest{Message: "Say hi", IdempotencyKey: "k", Surface: typev1.Surface_SURFACE_CODE})
			if err == nil {
				_, err = stream.Recv()
			}
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("StreamRun of the request on another surface with the key = %v, want INVALID_ARGUMENT", err)
			}
			// A retry, naming the user the first request left to the default, is the same request.
			if again := h.run(t, &agentv1.RunRequest{Message: "Say hi", IdempotencyKey: "k", UserId: "anonymous"}); again.GetRunId() != first.GetRunId() {
				t.Errorf("a retry with the key = run %s, want %s", again.GetRunId(), first.GetRunId())
			}
			// Another user's key is its own.
			if other := h.run(t, &agentv1.RunRequest{Message: "Say bye", IdempotencyKey: "k", UserId: "u2"}); other.GetRunId() == first.GetRunId() || other.GetFinalReport().GetContent() != "bye" {
				t.Errorf("another user's request with the key = run %s %q, want a run of its own", other.GetRunId(), other.GetFinalReport().GetContent())
			}
			if n := len(h.llm.Requests()); n != 2 {
				t.Errorf("%d model requests, want 2: one for each user's run", n)
			}
		})
	}
}

// TestAKeyNamingARunThatNeverStartedIsFreed: a replica that claimed an idempotency key and
// failed before storing its run (it crashed between the two writes, or the claim's answer
// was lost and its caller told the store failed) leaves the key naming a run that does not
// exist. A retry with the key waited on that run until its deadline, for the key's whole
// day; once the claim is durability.claim_timeout_ms old, the retry frees the key and runs,
// and the key names its run from then on. Before the timeout, the retry waits for the run
// to be stored, as for a replica that is still starting it.
func TestAKeyNamingARunThatNeverStartedIsFreed(t *testing.T) {
	cfg := config.Default()
	cfg.Durability.ClaimTimeoutMS = 1000
	h := start(t, cfg, llmtest.Scenario{Name: "retried", Match: "Say hi after a crash", Turns: []llmtest.Turn{{Content: "hi"}}})
	store, err := runstore.Open(t.Context(), h.mesh.NATS(), runstore.Config{Replicas: 1, Storage: jetstream.FileStorage,
		LeaseTTL: 10 * time.Second, IdempotencyTTL: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	for _, key := range []string{"run after a crash", "stream after a crash"} {
		if _, err := store.Claim(t.Context(), "u1", key, runstore.KeyClaim{RunID: "never-stored"}); err != nil { // the failed replica's claim
			t.Fatal(err)
		}
	}

	req := &agentv1.RunRequest{Message: "Say hi after a crash", UserId: "u1", IdempotencyKey: "run after a crash"}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // it waited on the run that never started
	defer cancel()
	first, err := h.client.Run(ctx, req)
	if err != nil {
		t.Fatalf("Run with a key naming a run that never started = %v", err)
	}
	if first.GetRunId() == "never-stored" || first.GetFinalReport().GetContent() != "hi" {
		t.Fatalf("Run with the key = run %s %q, want a new run answering hi", first.GetRunId(), first.GetFinalReport().GetContent())
	}
	if again := h.run(t, req); again.GetRunId() != first.GetRunId() {
		t.Errorf("a second Run with the key = run %s, want %s", again.GetRunId(), first.GetRunId())
	}

	stream, err := h.client.StreamRun(ctx, &agentv1.RunRequest{Message: "Say hi after a crash", UserId: "u1", IdempotencyKey: "stream after a crash"})
	if err != nil {
		t.Fatal(err)
	}
	got := received(t, stream)
	last := got[len(got)-1]
	if last.GetRunFinished() == nil || last.GetRunId() == "never-stored" || last.GetRunId() == first.GetRunId() {
		t.Errorf("StreamRun with the key ended with %s of run %s, want run_finished of a run of its own", events.Kind(last), last.GetRunId())
	}
	if n := len(h.llm.Requests()); n != 2 {
		t.Errorf("%d model requests, want 2: one a key", n)
	}
}

func TestResolveApprovalWithoutAPause(t *testing.T) {
	h := start(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := h.client.ResolveApproval(ctx, &agentv1.ResolveApprovalRequest{RunId: "r", CallId: "c"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "decision") {
		t.Errorf("no decision: %v", err)
	}
	_, err = h.client.ResolveApproval(ctx, &agentv1.ResolveApprovalRequest{RunId: "r", CallId: "c", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE})
	if status.Code(err) != codes.NotFound {
		t.Errorf("nothing waiting: %v", err)
	}
}

// TestMemoryOutage: with the memory service down, a run continues without memory and says
// so (MEMORY_UNAVAILABLE in a recovery_decided event and in the transcript).
func TestMemoryOutage(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "outage", Match: "remember anything?", Turns: []llmtest.Turn{text("not without memory")}})
	if err := h.mesh.Stop(t.Context(), mesh.Memory); err != nil {
		t.Fatal(err)
	}
	res := h.run(t, &agentv1.RunRequest{Message: "remember anything?"})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY {
		t.Fatalf("outcome %s %s (%v)", res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	var noted bool
	for _, e := range res.GetTranscript() {
		if e.GetState() == typev1.RunState_RUN_STATE_ASSEMBLE && strings.Contains(e.GetDetail(), "MEMORY_UNAVAILABLE") {
			noted = true
		}
	}
	if !noted {
		t.Error("no ASSEMBLE transcript entry says MEMORY_UNAVAILABLE")
	}
	evs, _ := h.storedEvents(t, res.GetRunId())
	var decided *eventv1.RecoveryDecided
	for _, ev := range evs {
		if d := ev.GetRecoveryDecided(); d != nil {
			decided = d
		}
	}
	if decided.GetError().GetCode() != typev1.StageErrorCode_STAGE_ERROR_CODE_MEMORY_UNAVAILABLE || decided.GetStrategy() != "fallback" {
		t.Errorf("recovery_decided %v, want MEMORY_UNAVAILABLE → fallback", decided)
	}
	// The memory stage could not store the result: the checkpoint store keeps it for GetRun.
	got, err := h.client.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: res.GetRunId()})
	if err != nil || got.GetOutcome() != res.GetOutcome() || len(got.GetTranscript()) != len(res.GetTranscript()) {
		t.Errorf("GetRun with memory down = %v, %v; want the whole result", got.GetOutcome(), err)
	}
}

// TestDecideEmptyAnswer: a model answer with no text and no tool call is no decision (seed
// 000: an empty response counts as an attempt and is tried again): Decide asks again, and when
// every attempt is empty answers seed 004's canned LLM-failure message, never an empty
// RESPOND_ONLY.
func TestDecideEmptyAnswer(t *testing.T) {
	h := start(t, nil,
		llmtest.Scenario{Name: "empty once", Match: "Say hello", Turns: []llmtest.Turn{{Respond: func(_ llmtest.Request, attempt int) llmtest.Turn {
			if attempt == 1 {
				return llmtest.Turn{}
			}
			return llmtest.Turn{Content: "Hello!"}
		}}}},
		llmtest.Scenario{Name: "always empty", Match: "Say nothing", Turns: []llmtest.Turn{{Respond: func(llmtest.Request, int) llmtest.Turn {
			return llmtest.Turn{}
		}}}},
	)
	for msg, want := range map[string]string{
		"Say hello":   "Hello!",
		"Say nothing": orchestrator.MessageProviderFailure,
	} {
		d, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: msg})
		if err != nil {
			t.Fatal(err)
		}
		if d.GetDecisionType() != typev1.DecisionType_DECISION_TYPE_RESPOND_ONLY || d.GetResponseText() != want {
			t.Errorf("%q: %v %q, want RESPOND_ONLY %q", msg, d.GetDecisionType(), d.GetResponseText(), want)
		}
	}
	var nothing int
	for _, r := range h.llm.Requests() {
		if strings.Contains(string(r.Messages[len(r.Messages)-1].Content), "Say nothing") {
			nothing++
		}
	}
	if nothing != 3 {
		t.Errorf("%d requests for the empty answers, want max_retries (3)", nothing)
	}
}

// TestDecideFilteredAnswer: an answer the provider's content filter stopped after part of it
// was delivered (finish_reason content_filter with text) is no decision, as a run does not take
// it for the model's answer: Decide asks again, and when every answer is stopped answers seed
// 004's canned LLM-failure message. The partial text was a RESPOND_ONLY decision.
func TestDecideFilteredAnswer(t *testing.T) {
	const partial = "Here is how to make the dangerous thing: first you"
	h := start(t, nil,
		llmtest.Scenario{Name: "filtered once", Match: "Explain the dangerous thing", Turns: []llmtest.Turn{{Respond: func(_ llmtest.Request, attempt int) llmtest.Turn {
			if attempt == 1 {
				return llmtest.Turn{Content: partial, FinishReason: "content_filter"}
			}
			return llmtest.Turn{Content: "I cannot help with that."}
		}}}},
		llmtest.Scenario{Name: "always filtered", Match: "Explain the forbidden thing", Turns: []llmtest.Turn{{Content: partial, FinishReason: "content_filter"}}},
	)
	for msg, want := range map[string]string{
		"Explain the dangerous thing": "I cannot help with that.",
		"Explain the forbidden thing": orchestrator.MessageProviderFailure,
	} {
		d, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: msg})
		if err != nil {
			t.Fatal(err)
		}
		if d.GetDecisionType() != typev1.DecisionType_DECISION_TYPE_RESPOND_ONLY || d.GetResponseText() != want {
			t.Errorf("%q: %v %q, want RESPOND_ONLY %q", msg, d.GetDecisionType(), d.GetResponseText(), want)
		}
	}
}

// TestDecideStampsEntriesWhenTheRequestFinished: a Decide's accounting entries carry the time
// their request finished, as a run's do (AccountingEntry.timestamp_ms; seed 000 §4 sequences
// events by it): its model's request, which takes 100 ms, is stamped at least its latency after
// the Decide began. It was stamped with the time the request started.
func TestDecideStampsEntriesWhenTheRequestFinished(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "slow", Match: "Say hello slowly", Turns: []llmtest.Turn{{Content: "Hello!", DelayMS: 100}}})
	began := time.Now().UnixMilli()
	d, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "Say hello slowly"})
	if err != nil {
		t.Fatal(err)
	}
	var own []*typev1.AccountingEntry
	for _, e := range d.GetAccounting() {
		if e.GetStage() == "" {
			own = append(own, e)
		}
	}
	if len(own) != 1 || own[0].GetLatencyMs() < 100 {
		t.Fatalf("accounting of the decision's requests %v, want one of at least 100 ms", own)
	}
	if e := own[0]; e.GetTimestampMs() < began+e.GetLatencyMs() {
		t.Errorf("the request of %d ms is stamped %d ms after the Decide began, want when it finished", e.GetLatencyMs(), e.GetTimestampMs()-began)
	}
}

// TestDecideConfirmsOnlyKnownTools: a "yes" to a pending confirmation whose calls name a tool
// the mesh does not have is INVALID_ARGUMENT naming the call and the tools there are, never an
// INVOKE_TOOL decision for a call nobody can make.
func TestDecideConfirmsOnlyKnownTools(t *testing.T) {
	h := start(t, nil)
	_, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "yes", PendingConfirmation: &typev1.PendingAction{
		ToolCalls: []*typev1.ToolCall{{Id: "c1", Name: "calculator"}, {Id: "c2", Name: "rm_everything"}}}})
	want := `pending_confirmation.tool_calls[1]: unknown tool "rm_everything"; available tools: calculator, current_time, knowledge_search`
	if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != want {
		t.Errorf("confirming an unknown tool: %v, want INVALID_ARGUMENT %q", err, want)
	}
}

// TestDecideKeepsToStrictMode: under a contract with strict_mode, a tool call whose arguments
// are not valid JSON is not repaired, as in a run: Decide refuses it to the model and asks
// again, and decides on the valid call of the next answer. It used to ask the generation stage
// without strict mode, which repaired the call into an INVOKE_TOOL decision.
func TestDecideKeepsToStrictMode(t *testing.T) {
	cfg := config.Default()
	cfg.Defaults.StrictMode = true
	h := start(t, cfg, llmtest.Scenario{Name: "malformed", Match: "What is 6 times 7?", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{Name: "calculator", Arguments: `{"expression": "6*7",}`}}},
		{ToolCalls: []llmtest.ToolCall{{Name: "calculator", Arguments: `{"expression": "6*8"}`}}},
	}})
	d, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "What is 6 times 7?"})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetDecisionType() != typev1.DecisionType_DECISION_TYPE_INVOKE_TOOL || len(d.GetToolCalls()) != 1 ||
		d.GetToolCalls()[0].GetArguments().GetFields()["expression"].GetStringValue() != "6*8" {
		t.Fatalf("decision %v %v, want INVOKE_TOOL of the second answer's valid call: the malformed one refused in strict mode",
			d.GetDecisionType(), d.GetToolCalls())
	}
	if n := len(h.llm.Requests()); n != 2 {
		t.Errorf("%d model requests, want 2", n)
	}
}

// TestDecideKeepsToTheContractsToolPolicy: Decide offers the model only the tools a run under
// the orchestrator's default contract may use: none under its tool_policy forbidden (the
// intent stage's policy decides only when the contract sets none), only those of its
// allowed_tools; nor does a confirmed call of another tool become INVOKE_TOOL. It offered
// every tool, so a decision could call a tool no run may.
func TestDecideKeepsToTheContractsToolPolicy(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(c *typev1.ExecutionContract)
		offers []string
	}{
		{"forbidden", func(c *typev1.ExecutionContract) { c.ToolPolicy = typev1.ToolPolicy_TOOL_POLICY_FORBIDDEN }, nil},
		{"allowed tools", func(c *typev1.ExecutionContract) { c.AllowedTools = []string{"current_time"} }, []string{"current_time"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
				o.Orchestrator = func(oo *orchestrator.Options) { tc.edit(oo.Contract) }
			}, llmtest.Scenario{Name: "calc", Match: "What is 6 times 7?", Turns: []llmtest.Turn{
				{ToolCalls: []llmtest.ToolCall{{Name: "calculator", Arguments: `{"expression": "6*7"}`}}},
				{Content: "42"}, {Content: "42"}, {Content: "42"},
			}})
			d, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "What is 6 times 7?"})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range d.GetToolCalls() {
				t.Errorf("decision %v calls %s, which the contract does not let a run use", d.GetDecisionType(), c.GetName())
			}
			var offered []string
			for _, tool := range h.llm.Requests()[0].Tools {
				offered = append(offered, tool.Function.Name)
			}
			if !slices.Equal(offered, tc.offers) {
				t.Errorf("tools offered %v, want %v", offered, tc.offers)
			}
			// Nor is a confirmed call of such a tool made.
			_, err = h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "yes", PendingConfirmation: &typev1.PendingAction{
				ToolCalls: []*typev1.ToolCall{{Id: "c1", Name: "calculator"}}}})
			want := `pending_confirmation.tool_calls[0]: unknown tool "calculator"; available tools: ` + strings.Join(tc.offers, ", ")
			if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != want {
				t.Errorf("confirming a call of a tool the contract does not allow: %v, want INVALID_ARGUMENT %q", err, want)
			}
		})
	}
}

// TestDecideFitsTheWindow: Decide's request fits its targets' context window as a run's does
// (a run's context assembly leaves out the oldest history). It sent the whole message_history
// (up to 2 MiB), which a provider refuses (HTTP 400): every target refused it, and the caller
// got the canned provider failure message. The oldest history is left out to fit; a message
// that does not fit even alone is INVALID_ARGUMENT naming message and the window.
func TestDecideFitsTheWindow(t *testing.T) {
	h := startWith(t, nil, func(cfg *config.Config, _ string) {
		p := cfg.Providers["scripted"]
		p.Models = map[string]config.Model{"gpt-test": {ContextWindow: 4000, ContextWindowBufferTokens: 100, MaxOutputTokens: 500}}
		cfg.Providers["scripted"] = p
	}, llmtest.Scenario{Name: "any", Match: "*", Turns: slices.Repeat([]llmtest.Turn{text("Noted.")}, 41)}) // whatever is kept
	var history []*typev1.Message
	for i := range 40 {
		history = append(history,
			&typev1.Message{Role: typev1.Role_ROLE_USER, Content: fmt.Sprintf("Question %d: %s", i, strings.Repeat("what about the weather? ", 30))},
			&typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: fmt.Sprintf("Answer %d: %s", i, strings.Repeat("it is sunny. ", 30))})
	}
	d, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "And tomorrow?", MessageHistory: history})
	if err != nil || d.GetResponseText() != "Noted." {
		t.Fatalf("decision %v, %v; want the model's answer", d, err)
	}
	reqs := h.llm.Requests()
	sent := reqs[len(reqs)-1]
	var msgs []*typev1.Message
	for _, m := range sent.Messages {
		msgs = append(msgs, &typev1.Message{Content: string(m.Content)})
	}
	if n := tokens.ForModel("gpt-test").Messages(msgs); n > 4000-100-500 {
		t.Errorf("the request's messages hold %d tokens, over the %d the window leaves", n, 4000-100-500)
	}
	if last := string(sent.Messages[len(sent.Messages)-1].Content); last != "And tomorrow?" {
		t.Errorf("the request ends with %q, want the message", last)
	}
	if !strings.Contains(string(sent.Messages[len(sent.Messages)-2].Content), "Answer 39:") {
		t.Errorf("the newest history was left out")
	}

	_, err = h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: strings.Repeat("Tell me everything about the weather. ", 600)})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "message") || !strings.Contains(err.Error(), "4000") {
		t.Errorf("a message over the window: %v, want INVALID_ARGUMENT naming message and the window", err)
	}
}

// TestDecideRetriesFitTheWindow: a call Decide refuses to the model (here of a tool it was not
// offered) goes into the next attempt's request with the refusal, and that request fits the
// window as the first did: the oldest history is left out for it. Only the first request was
// fitted, so the retries, each larger by the refused answer, went over the window, which a
// provider refuses (HTTP 400).
func TestDecideRetriesFitTheWindow(t *testing.T) {
	h := startWith(t, nil, func(cfg *config.Config, _ string) {
		p := cfg.Providers["scripted"]
		p.Models = map[string]config.Model{"gpt-test": {ContextWindow: 4000, ContextWindowBufferTokens: 100, MaxOutputTokens: 500}}
		cfg.Providers["scripted"] = p
	}, llmtest.Scenario{Name: "any", Match: "*", Turns: []llmtest.Turn{
		call("launch_rockets", `{"why": "`+strings.Repeat("because ", 400)+`"}`),
		call("launch_rockets", `{"why": "`+strings.Repeat("really ", 400)+`"}`),
		text("Noted."),
	}})
	// Without assistant messages in history, the scripted model answers by the attempt.
	var history []*typev1.Message
	for i := range 80 {
		history = append(history, &typev1.Message{Role: typev1.Role_ROLE_USER,
			Content: fmt.Sprintf("Note %d: %s", i, strings.Repeat("the weather was fine. ", 30))})
	}
	d, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "And tomorrow?", MessageHistory: history})
	if err != nil || d.GetResponseText() != "Noted." {
		t.Fatalf("decision %v, %v; want the model's answer after two refused calls", d, err)
	}
	reqs := h.llm.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	counter := tokens.ForModel("gpt-test")
	for i, sent := range reqs {
		var msgs []*typev1.Message
		for _, m := range sent.Messages {
			msg := &typev1.Message{Content: string(m.Content)}
			for _, c := range m.ToolCalls {
				msg.ToolCalls = append(msg.ToolCalls, &typev1.ToolCall{Name: c.Function.Name, RawArguments: c.Function.Arguments})
			}
			msgs = append(msgs, msg)
		}
		if n := counter.Messages(msgs); n > 4000-100-500 {
			t.Errorf("request %d: its messages hold %d tokens, over the %d the window leaves", i+1, n, 4000-100-500)
		}
	}
	last := reqs[2].Messages
	if tool := last[len(last)-1]; tool.Role != "tool" || !strings.Contains(string(tool.Content), "launch_rockets") {
		t.Errorf("the last request ends with %s %q, want the refusal of the latest call", tool.Role, tool.Content)
	}
	if !slices.ContainsFunc(last, func(m llmtest.Message) bool { return string(m.Content) == "And tomorrow?" }) {
		t.Errorf("the last request lost the message")
	}
}

// TestDecideRetriesLeaveOutOlderRefusals: when the refused answers themselves no longer fit
// the window with the message, the oldest of them is left out with its refusal, and the latest
// is kept, so that the model still sees why its last answer was refused.
func TestDecideRetriesLeaveOutOlderRefusals(t *testing.T) {
	first, second := strings.Repeat("because ", 750), strings.Repeat("really ", 850)
	h := startWith(t, nil, func(cfg *config.Config, _ string) {
		p := cfg.Providers["scripted"]
		p.Models = map[string]config.Model{"gpt-test": {ContextWindow: 4000, ContextWindowBufferTokens: 100, MaxOutputTokens: 500}}
		cfg.Providers["scripted"] = p
	}, llmtest.Scenario{Name: "any", Match: "*", Turns: []llmtest.Turn{
		call("launch_rockets", `{"why": "`+first+`"}`),
		{Respond: func(req llmtest.Request, _ int) llmtest.Turn {
			for _, m := range req.Messages {
				for _, c := range m.ToolCalls {
					if strings.Contains(c.Function.Arguments, "really") {
						return text("Noted.")
					}
				}
			}
			return call("launch_rockets", `{"why": "`+second+`"}`)
		}},
	}})
	d, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "Launch them."})
	if err != nil || d.GetResponseText() != "Noted." {
		t.Fatalf("decision %v, %v; want the model's answer after two refused calls", d, err)
	}
	reqs := h.llm.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	var assistants []string
	for _, m := range reqs[2].Messages {
		for _, c := range m.ToolCalls {
			assistants = append(assistants, c.Function.Arguments[:20])
		}
	}
	if len(assistants) != 1 || !strings.Contains(assistants[0], "really") {
		t.Errorf("the last request holds the refused calls %q, want only the latest", assistants)
	}
	if tool := reqs[2].Messages[len(reqs[2].Messages)-1]; tool.Role != "tool" {
		t.Errorf("the last request ends with %s %q, want the latest refusal", tool.Role, tool.Content)
	}
}
