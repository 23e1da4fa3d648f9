package mesh_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"github.com/agentmesh/agentmesh/services/generation"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// tooMuch is recovery's question when a tool returned more than the observation stage reads.
const tooMuch = "A tool returned more data than I can read. How would you like me to proceed?"

// askMesh is a mesh (n orchestrator replicas) whose observation stage reads at most 100 bytes
// and whose tool export returns 300: its result cannot be summarised adequately
// (OBSERVATION_TOO_LARGE), so recovery asks the user how to proceed.
func askMesh(t *testing.T, n int, change func(*config.Config), scenarios ...llmtest.Scenario) *harness {
	t.Helper()
	tools := staticTools(t, map[string]string{"export": strings.Repeat("row\n", 75)})
	cfg := config.Default()
	cfg.Observation.MaxInputBytes = 100
	cfg.RestTools = map[string]config.RestTool{"export": {Description: "Exports every record.", URL: tools.URL + "/export"}}
	cfg.Durability.LeaseTTLMS = 1000
	if change != nil {
		change(cfg)
	}
	return startReplicas(t, cfg, n, nil, scenarios...)
}

// exportScenario asks for the export, then answers with reply once the user has answered. The
// question is the conversation's second assistant message, so the reply is the third turn.
func exportScenario(message, reply string) llmtest.Scenario {
	return llmtest.Scenario{Name: message, Match: message, Turns: []llmtest.Turn{call("export", `{}`), text("never asked: the run asked this"), text(reply)}}
}

// asking checks a run paused for its user's answer and returns the question's id.
func asking(t *testing.T, res *typev1.RunResult) string {
	t.Helper()
	q := res.GetPendingQuestion()
	if res.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_INPUT || res.GetExitReason() != orchestrator.ExitInputRequired || res.GetSuccess() {
		t.Fatalf("outcome %s %s, want a pause for an answer", res.GetOutcome(), res.GetExitReason())
	}
	if q.GetQuestion() != tooMuch || q.GetId() != "turn-1" || q.GetExpiresAt() == nil || q.GetRunId() != res.GetRunId() ||
		!strings.Contains(q.GetReason(), "export") || !strings.Contains(q.GetReason(), "over the limit of 100 bytes") {
		t.Fatalf("pending question %v", q)
	}
	if d := res.GetDecision(); d.GetDecisionType() != typev1.DecisionType_DECISION_TYPE_ASK_CLARIFICATION || d.GetClarificationQuestion() != tooMuch {
		t.Errorf("decision %v", d)
	}
	if conv := res.GetConversation(); conv[len(conv)-1].GetContent() != tooMuch || conv[len(conv)-1].GetRole() != typev1.Role_ROLE_ASSISTANT {
		t.Errorf("the conversation ends with %v, want the question", conv[len(conv)-1])
	}
	return q.GetId()
}

// answered checks a run that went on with the answer to its question and completed: the
// model's next request carries the question and the answer after the tool's failure.
func answered(t *testing.T, h *harness, message, answer string, final *typev1.RunResult, kinds []string) {
	t.Helper()
	if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s (%v)", final.GetOutcome(), final.GetExitReason(), final.GetError())
	}
	if count(kinds, "input_requested") != 1 || count(kinds, "input_answered") != 1 || count(kinds, "run_finished") != 1 {
		t.Errorf("events %v", kinds)
	}
	reqs := requestsFor(h.llm, message)
	if len(reqs) != 2 {
		t.Fatalf("%d LLM requests, want 2", len(reqs))
	}
	msgs := reqs[1].Messages
	tool, question, reply := msgs[len(msgs)-3], msgs[len(msgs)-2], msgs[len(msgs)-1]
	if tool.Role != "tool" || !strings.Contains(string(tool.Content), "OBSERVATION_TOO_LARGE") && !strings.Contains(string(tool.Content), "could not be observed") {
		t.Errorf("the tool message %v does not say the result could not be observed", tool)
	}
	if question.Role != "assistant" || string(question.Content) != tooMuch || reply.Role != "user" || string(reply.Content) != answer {
		t.Errorf("the model's next request ends with %s %q, %s %q; want the question and the answer", question.Role, question.Content, reply.Role, reply.Content)
	}
	checkInvariants(t, final)
}

// TestAskUserPausesForTheAnswer (issue 13.4, seed 003: unknown → ask user for guidance): when
// recovery decides to ask the user — here, a result too large to summarise adequately — the
// run pauses (OUTCOME_AWAITING_INPUT, the question in pending_question, the decision and the
// conversation) instead of ending, AgentService.Answer resumes it, and the model's next turn
// sees the question and the answer. It holds with durable runs and without. Bad answers are
// refused with the field or the question named.
func TestAskUserPausesForTheAnswer(t *testing.T) {
	for _, durable := range []bool{true, false} {
		t.Run(fmt.Sprintf("checkpoints %v", durable), func(t *testing.T) {
			const message, answer = "Export everything.", "Export only the first page."
			h := askMesh(t, 1, func(cfg *config.Config) { cfg.Durability.Checkpoints = durable },
				exportScenario(message, "Here is the first page."))
			res := h.run(t, &agentv1.RunRequest{Message: message})
			id := asking(t, res)
			got, err := h.client.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: res.GetRunId()})
			if err != nil || got.GetPendingQuestion().GetId() != id {
				t.Fatalf("GetRun of the paused run = %v, %v", got.GetPendingQuestion(), err)
			}
			// The paused result verifies, and its question is the one the pause recorded.
			if err := transcript.VerifyResult(got); err != nil {
				t.Errorf("the paused result does not verify: %v", err)
			}
			got.PendingQuestion.Question = "Shall I delete every record?"
			if err := transcript.VerifyResult(got); err == nil || !strings.Contains(err.Error(), "AWAIT_INPUT): the pending question does not match action_hash") {
				t.Errorf("VerifyResult(an altered pending question) = %v", err)
			}
			_, err = h.client.Answer(t.Context(), &agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: "  "})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "answer") {
				t.Errorf("an empty answer: %v, want INVALID_ARGUMENT naming answer", err)
			}
			_, err = h.client.Answer(t.Context(), &agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: answer, QuestionId: "turn-9"})
			wantCode(t, err, codes.NotFound, "an answer to another question")
			resp, err := h.client.Answer(t.Context(), &agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: answer})
			if err != nil || !resp.GetResumed() || resp.GetQuestionId() != id {
				t.Fatalf("Answer = %v, %v", resp, err)
			}
			_, err = h.client.Answer(t.Context(), &agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: "again"})
			if c := status.Code(err); c != codes.FailedPrecondition && c != codes.NotFound {
				t.Errorf("a second answer: %v, want FAILED_PRECONDITION (answered) or NOT_FOUND (resumed)", err)
			}
			final, kinds := h.finish(t, res.GetRunId())
			answered(t, h, message, answer, final, kinds)
			if final.GetFinalReport().GetContent() != "Here is the first page." || final.GetDecision().GetDecisionType() != typev1.DecisionType_DECISION_TYPE_RESPOND_ONLY {
				t.Errorf("final report %q, decision %v", final.GetFinalReport().GetContent(), final.GetDecision())
			}
		})
	}
}

// TestAskUserOnAnotherReplica (issue 13.4): the answer travels through the run-inputs bucket,
// so the replica that does not own the paused run takes it, and so does the replica that
// adopts the run from its paused checkpoint when its owner stops.
func TestAskUserOnAnotherReplica(t *testing.T) {
	for _, handOff := range []bool{false, true} {
		name := "owner alive"
		if handOff {
			name = "owner stopped"
		}
		t.Run(name, func(t *testing.T) {
			const message, answer = "Export it all.", "Skip it."
			h := askMesh(t, 2, nil, exportScenario(message, "Skipped."))
			a, b := h.replicas[0], h.replicas[1]
			res, err := a.Run(t.Context(), &agentv1.RunRequest{Message: message})
			if err != nil {
				t.Fatal(err)
			}
			asking(t, res)
			if handOff {
				h.mesh.StopOrchestrator(context.WithoutCancel(t.Context()), 0)
			}
			if got, err := b.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: res.GetRunId()}); err != nil || got.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_INPUT {
				t.Fatalf("GetRun on the other replica = %v, %v", got.GetOutcome(), err)
			}
			if resp, err := b.Answer(t.Context(), &agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: answer}); err != nil || !resp.GetResumed() {
				t.Fatalf("Answer on the other replica = %v, %v", resp, err)
			}
			final, kinds := finishOn(t, b, res.GetRunId())
			answered(t, h, message, answer, final, kinds)
			if handOff && count(kinds, "run_resumed") != 1 {
				t.Errorf("events %v, want the run resumed once", kinds)
			}
		})
	}
}

// TestAskUserTimeout (issue 13.4): a question nobody answers within answer_timeout_ms ends the
// run FAILED_TIMEOUT / ANSWER_TIMEOUT with a report that says so, without asking the model
// again.
func TestAskUserTimeout(t *testing.T) {
	const message = "Export the lot."
	h := askMesh(t, 1, nil, exportScenario(message, "never asked"))
	res := h.run(t, &agentv1.RunRequest{Message: message, Overrides: &agentv1.RunOverrides{AnswerTimeoutMs: i64(100)}})
	asking(t, res)
	final, kinds := h.finish(t, res.GetRunId())
	if final.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_TIMEOUT || final.GetExitReason() != orchestrator.ExitAnswerTimeout || !final.GetError().GetRetryable() {
		t.Fatalf("outcome %s %s (%v), want FAILED_TIMEOUT ANSWER_TIMEOUT", final.GetOutcome(), final.GetExitReason(), final.GetError())
	}
	if got := final.GetFinalReport().GetContent(); got != "Nobody answered my question in time, so I stopped." {
		t.Errorf("final report %q", got)
	}
	if count(kinds, "input_requested") != 1 || count(kinds, "input_answered") != 0 {
		t.Errorf("events %v", kinds)
	}
	if n := len(requestsFor(h.llm, message)); n != 1 {
		t.Errorf("%d LLM requests, want 1", n)
	}
	_, err := h.client.Answer(t.Context(), &agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: "too late"})
	wantCode(t, err, codes.NotFound, "an answer after the timeout")
	checkInvariants(t, final)
}

// TestUnclearIntentPausesForTheAnswer (issue 13.4): when the intent stage cannot tell what the
// user wants (INTENT_UNCLEAR) and recovery decides to ask the user, the run pauses before it
// plans, with question "intent", instead of ending; the answer is parsed with the message, and
// the run plans and completes. An answer that leaves the intent unclear ends the run with the
// question, not a second pause. It holds with durable runs and without.
func TestUnclearIntentPausesForTheAnswer(t *testing.T) {
	const (
		message  = "???"
		answer   = "What is 6 times 7?"
		question = "I'm not sure what you'd like me to do. Could you rephrase or add more detail?"
	)
	for _, durable := range []bool{true, false} {
		t.Run(fmt.Sprintf("checkpoints %v", durable), func(t *testing.T) {
			h := askMesh(t, 1, func(cfg *config.Config) { cfg.Durability.Checkpoints = durable },
				llmtest.Scenario{Name: "unclear", Match: message, Turns: []llmtest.Turn{
					text("never asked: the question is the first assistant message"), call("calculator", `{"expression":"6*7"}`), text("42."),
				}})
			res := h.run(t, &agentv1.RunRequest{Message: message})
			q := res.GetPendingQuestion()
			if res.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_INPUT || q.GetId() != orchestrator.IntentQuestionID || q.GetQuestion() != question ||
				!strings.Contains(q.GetReason(), "no letters or digits") {
				t.Fatalf("outcome %s %s, question %v: want a pause asking about the intent", res.GetOutcome(), res.GetExitReason(), q)
			}
			if n := len(h.llm.Requests()); n != 0 {
				t.Errorf("%d LLM requests before the answer, want none", n)
			}
			if resp, err := h.client.Answer(t.Context(), &agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: answer}); err != nil || resp.GetQuestionId() != orchestrator.IntentQuestionID {
				t.Fatalf("Answer = %v, %v", resp, err)
			}
			final, kinds := h.finish(t, res.GetRunId())
			if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS || final.GetFinalReport().GetContent() != "42." {
				t.Fatalf("outcome %s %s (%v), report %q", final.GetOutcome(), final.GetExitReason(), final.GetError(), final.GetFinalReport().GetContent())
			}
			if count(kinds, "input_requested") != 1 || count(kinds, "input_answered") != 1 || count(kinds, "intent_parsed") != 1 || count(kinds, "plan_created") != 1 {
				t.Errorf("events %v", kinds)
			}
			msgs := requestsFor(h.llm, message)[0].Messages
			if n := len(msgs); n < 3 || string(msgs[n-2].Content) != question || string(msgs[n-1].Content) != answer || msgs[n-1].Role != "user" {
				t.Errorf("the model's first request ends with %v, want the question and the answer", msgs[max(0, n-2):])
			}
			if d := planEntries(final)["PLAN"]; !strings.Contains(d, "steps") {
				t.Errorf("PLAN entry %q, want the answer planned", d)
			}
			// The message without letters or digits, joined to the answer at a line break, was
			// a step of its own ("???", then the answer).
			if d := planEntries(final)["PLAN"]; !strings.HasPrefix(d, "1 steps ") {
				t.Errorf("PLAN entry %q (entries %v), want one step: the answer's", d, planEntries(final))
			}
			checkInvariants(t, final)
		})
	}

	t.Run("owner stopped", func(t *testing.T) {
		h := askMesh(t, 2, nil, llmtest.Scenario{Name: "unclear", Match: message, Turns: []llmtest.Turn{text("never asked"), text("Ask me anything.")}})
		a, b := h.replicas[0], h.replicas[1]
		res, err := a.Run(t.Context(), &agentv1.RunRequest{Message: message})
		if err != nil || res.GetPendingQuestion().GetId() != orchestrator.IntentQuestionID {
			t.Fatalf("Run = %v, %v; want a pause", res.GetOutcome(), err)
		}
		h.mesh.StopOrchestrator(context.WithoutCancel(t.Context()), 0)
		if resp, err := b.Answer(t.Context(), &agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: "Say hello."}); err != nil || !resp.GetResumed() {
			t.Fatalf("Answer on the other replica = %v, %v", resp, err)
		}
		final, kinds := finishOn(t, b, res.GetRunId())
		if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || final.GetFinalReport().GetContent() != "Ask me anything." ||
			count(kinds, "run_resumed") != 1 || count(kinds, "intent_parsed") != 1 {
			t.Errorf("outcome %s %s, report %q, events %v", final.GetOutcome(), final.GetExitReason(), final.GetFinalReport().GetContent(), kinds)
		}
		checkInvariants(t, final)
	})

	t.Run("still unclear", func(t *testing.T) {
		h := askMesh(t, 1, nil)
		res := h.run(t, &agentv1.RunRequest{Message: message})
		if res.GetPendingQuestion().GetId() != orchestrator.IntentQuestionID {
			t.Fatalf("outcome %s, want a pause", res.GetOutcome())
		}
		if _, err := h.client.Answer(t.Context(), &agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: "!!!"}); err != nil {
			t.Fatal(err)
		}
		final, kinds := h.finish(t, res.GetRunId())
		if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || final.GetFinalReport().GetContent() != question || count(kinds, "input_requested") != 1 {
			t.Errorf("outcome %s, report %q, events %v: want the question as the answer, asked once", final.GetOutcome(), final.GetFinalReport().GetContent(), kinds)
		}
	})
}

// TestLateAnswerIsRefused: an answer that comes after the question's expires_at is refused
// NOT_FOUND (the run does not ask any more), also while no replica owns the paused run, which
// then ends ANSWER_TIMEOUT when a replica adopts it: the caller is never told resumed for an
// answer the run will not take.
func TestLateAnswerIsRefused(t *testing.T) {
	const message = "Export the rest."
	h := askMesh(t, 2, nil, exportScenario(message, "never asked"))
	a, b := h.replicas[0], h.replicas[1]
	res, err := a.Run(t.Context(), &agentv1.RunRequest{Message: message, Overrides: &agentv1.RunOverrides{AnswerTimeoutMs: i64(200)}})
	if err != nil {
		t.Fatal(err)
	}
	asking(t, res)
	h.mesh.StopOrchestrator(context.WithoutCancel(t.Context()), 0) // nobody times the question out now
	expired := time.NewTimer(time.Until(res.GetPendingQuestion().GetExpiresAt().AsTime()))
	<-expired.C // the question's own deadline
	_, err = b.Answer(t.Context(), &agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: "too late"})
	wantCode(t, err, codes.NotFound, "an answer after the question expired")
	final, _ := finishOn(t, b, res.GetRunId())
	if final.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_TIMEOUT || final.GetExitReason() != orchestrator.ExitAnswerTimeout {
		t.Fatalf("outcome %s %s (%v), want FAILED_TIMEOUT ANSWER_TIMEOUT", final.GetOutcome(), final.GetExitReason(), final.GetError())
	}
	if n := len(requestsFor(h.llm, message)); n != 1 {
		t.Errorf("%d LLM requests, want 1", n)
	}
}

// TestAnswerInTimeIsTaken: an answer accepted before the question's expires_at (Answer said
// resumed) is the run's answer, though the run gets it only after the deadline passed: here it
// was recorded while no replica owned the paused run, which a replica adopts only after the
// question expired (questions of 6 s, which leave time to answer on a loaded machine; a lease
// of 12 s: the replicas look for runs to adopt every 4 s). The run goes on with the answer and completes, never ANSWER_TIMEOUT; the deadline and the answer
// are not left to race.
func TestAnswerInTimeIsTaken(t *testing.T) {
	const runs = 4
	var scenarios []llmtest.Scenario
	for i := range runs {
		scenarios = append(scenarios, exportScenario(fmt.Sprintf("Export batch %d.", i), fmt.Sprintf("Batch %d skipped.", i)))
	}
	h := askMesh(t, 2, func(cfg *config.Config) { cfg.Durability.LeaseTTLMS = 12_000 }, scenarios...)
	a, b := h.replicas[0], h.replicas[1]
	var ids [runs]string
	for i := range runs {
		message := fmt.Sprintf("Export batch %d.", i)
		res, err := a.Run(t.Context(), &agentv1.RunRequest{Message: message, Overrides: &agentv1.RunOverrides{AnswerTimeoutMs: i64(6000)}})
		if err != nil {
			t.Fatal(err)
		}
		asking(t, res)
		ids[i] = res.GetRunId()
	}
	h.mesh.StopOrchestrator(context.WithoutCancel(t.Context()), 0) // hands the paused runs off
	for _, id := range ids {
		if resp, err := b.Answer(t.Context(), &agentv1.AnswerRequest{RunId: id, Answer: "Skip it."}); err != nil || !resp.GetResumed() {
			t.Fatalf("Answer before the question expired = %v, %v", resp, err)
		}
	}
	for i, id := range ids {
		final, kinds := finishOn(t, b, id)
		if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS || count(kinds, "input_answered") != 1 {
			t.Errorf("run %d: %s %s (%v), events %v; want it completed with the answer it was told was taken",
				i, final.GetOutcome(), final.GetExitReason(), final.GetError().GetMessage(), kinds)
		}
	}
}

// TestClarificationAnswerFitsTheIntentLimit: the answer to the intent question is parsed with
// the run's message, and the intent stage takes 64 KiB: an answer that would make the two
// longer is refused at once, INVALID_ARGUMENT naming the field, the room left and the limit,
// and the run still waits for an answer; one that fits is taken and the run completes, never
// failing late in the intent stage. It holds with durable runs and without.
func TestClarificationAnswerFitsTheIntentLimit(t *testing.T) {
	message := strings.Repeat("?", 60<<10) // no letters or digits: the intent is unclear
	room := orchestrator.MaxMessageBytes - len(message) - len("\n\n")
	for _, durable := range []bool{true, false} {
		t.Run(fmt.Sprintf("checkpoints %v", durable), func(t *testing.T) {
			h := askMesh(t, 1, func(cfg *config.Config) { cfg.Durability.Checkpoints = durable },
				llmtest.Scenario{Name: "long", Match: message, Turns: []llmtest.Turn{text("never asked"), text("Hello.")}})
			res := h.run(t, &agentv1.RunRequest{Message: message})
			if res.GetPendingQuestion().GetId() != orchestrator.IntentQuestionID {
				t.Fatalf("outcome %s %s, want a pause asking about the intent", res.GetOutcome(), res.GetExitReason())
			}
			fits := "Say hello." + strings.Repeat(" and hello", (room-10)/10)
			fits += strings.Repeat(".", room-len(fits))
			_, err := h.client.Answer(t.Context(), &agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: fits + "!"})
			want := fmt.Sprintf("answer: at most %d bytes, got %d: the answer to question %q is parsed with the run's message of %d bytes, together at most %d bytes",
				room, room+1, orchestrator.IntentQuestionID, len(message), orchestrator.MaxMessageBytes)
			if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != want {
				t.Fatalf("an answer 1 byte too long: %v, want INVALID_ARGUMENT %q", err, want)
			}
			if resp, err := h.client.Answer(t.Context(), &agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: fits}); err != nil || !resp.GetResumed() {
				t.Fatalf("an answer that fits: %v, %v", resp, err)
			}
			final, _ := h.finish(t, res.GetRunId())
			if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || final.GetFinalReport().GetContent() != "Hello." {
				t.Errorf("outcome %s %s (%v), report %q", final.GetOutcome(), final.GetExitReason(), final.GetError().GetMessage(), final.GetFinalReport().GetContent())
			}
		})
	}
}

// unknownFailureProvider is a provider of Go code whose first chat call fails in a way
// recovery's table does not know (FAILED_PRECONDITION), so recovery decides to ask the user
// how to proceed; its later calls go to the provider it wraps.
type unknownFailureProvider struct {
	generation.Provider
	failed *atomic.Bool
}

func (p unknownFailureProvider) fail() error {
	if p.failed.Swap(true) {
		return nil
	}
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION, "the model is being reloaded")
}

func (p unknownFailureProvider) Complete(ctx context.Context, req *generation.Request) (*generation.Response, error) {
	if err := p.fail(); err != nil {
		return nil, err
	}
	return p.Provider.Complete(ctx, req)
}

func (p unknownFailureProvider) Stream(ctx context.Context, req *generation.Request, onDelta func(*generationv1.Delta) error) (*generation.Response, error) {
	if err := p.fail(); err != nil {
		return nil, err
	}
	return p.Provider.Stream(ctx, req, onDelta)
}

// TestNoQuestionInTheLastTurn: recovery asks the user how to proceed after a generation
// failure it does not know, and the answer reaches the model in the next turn. In the last
// turn max_turns allows no turn follows to use an answer: the run does not ask a question it
// cannot use (it paused, then ended MAX_TURNS_REACHED without the model seeing the answer),
// but ends with the failure, as an abort does.
func TestNoQuestionInTheLastTurn(t *testing.T) {
	const message, answer = "Summarise the report.", "Try again, please."
	h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		providers, err := generation.ProvidersFromConfig(o.Config)
		if err != nil {
			t.Fatal(err)
		}
		o.Providers = map[string]generation.Provider{"scripted": unknownFailureProvider{providers["scripted"], new(atomic.Bool)}}
	}, llmtest.Scenario{Match: message, Turns: []llmtest.Turn{
		text("never asked: the question is the conversation's first assistant message"), text("The report is short."),
	}})
	const unknown = "Something unexpected went wrong. How would you like me to proceed?"

	// Two turns: the first asks, the second answers with the user's guidance.
	res := h.run(t, &agentv1.RunRequest{Message: message, Overrides: &agentv1.RunOverrides{MaxTurns: i32(2)}})
	q := res.GetPendingQuestion()
	if res.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_INPUT || q.GetQuestion() != unknown || q.GetId() != "turn-1" {
		t.Fatalf("outcome %s %s, question %v; want a pause for the answer", res.GetOutcome(), res.GetExitReason(), q)
	}
	if _, err := h.client.Answer(t.Context(), &agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: answer, QuestionId: q.GetId()}); err != nil {
		t.Fatal(err)
	}
	final, _ := h.finish(t, res.GetRunId())
	if !final.GetSuccess() || final.GetFinalReport().GetContent() != "The report is short." {
		t.Fatalf("outcome %s %s, report %q", final.GetOutcome(), final.GetExitReason(), final.GetFinalReport().GetContent())
	}
	reqs := requestsFor(h.llm, message)
	msgs := reqs[len(reqs)-1].Messages // then the final turn's notice
	if question, reply := msgs[len(msgs)-3], msgs[len(msgs)-2]; string(question.Content) != unknown || reply.Role != "user" || string(reply.Content) != answer {
		t.Errorf("the model's last request ends with %q, %s %q; want the question and the answer", question.Content, reply.Role, reply.Content)
	}

	// One turn: nothing would use an answer, so no question is asked.
	h2 := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		providers, err := generation.ProvidersFromConfig(o.Config)
		if err != nil {
			t.Fatal(err)
		}
		o.Providers = map[string]generation.Provider{"scripted": unknownFailureProvider{providers["scripted"], new(atomic.Bool)}}
	}, llmtest.Scenario{Match: message, Turns: []llmtest.Turn{text("never asked")}})
	res = h2.run(t, &agentv1.RunRequest{Message: message, Overrides: &agentv1.RunOverrides{MaxTurns: i32(1)}})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PROVIDER || res.GetExitReason() != orchestrator.ExitLLMError ||
		res.GetPendingQuestion() != nil {
		t.Fatalf("outcome %s %s, question %v; want FAILED_PROVIDER LLM_ERROR without a question",
			res.GetOutcome(), res.GetExitReason(), res.GetPendingQuestion())
	}
	if got := res.GetFinalReport().GetContent(); got != orchestrator.MessageProviderFailure {
		t.Errorf("final report %q", got)
	}
	if !strings.Contains(res.GetError().GetMessage(), "the model is being reloaded") {
		t.Errorf("error %v does not carry the failure", res.GetError())
	}
	kinds := checkEvents(t, h2, res)
	if count(kinds, "input_requested") != 0 {
		t.Errorf("events %v: a question was asked", kinds)
	}
	checkInvariants(t, res)
}

// TestPauseEndsByTheRunsDeadline: total_timeout_ms counts through a pause, so a pause never
// promises a deadline the run does not keep. A question asked with answer_timeout_ms longer
// than the run has left expires at the run's deadline (expires_at), and so does a tool call's
// approval; nobody answering, the run ends there FAILED_TIMEOUT / TIMEOUT, as at any other
// point of its time, and an answer after expires_at is refused NOT_FOUND. It holds with
// durable runs and without.
func TestPauseEndsByTheRunsDeadline(t *testing.T) {
	const total = 3 * time.Second
	ended := func(t *testing.T, final *typev1.RunResult) {
		t.Helper()
		if final.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_TIMEOUT || final.GetExitReason() != orchestrator.ExitTimeout ||
			!strings.Contains(final.GetError().GetMessage(), "total_timeout_ms") {
			t.Errorf("outcome %s %s (%v), want FAILED_TIMEOUT TIMEOUT: total_timeout_ms", final.GetOutcome(), final.GetExitReason(), final.GetError())
		}
	}
	within := func(t *testing.T, expires time.Time, before, after time.Time) {
		t.Helper()
		if expires.Before(before.Add(total)) || expires.After(after.Add(total)) {
			t.Fatalf("expires_at %s, want the run's deadline, between %s and %s",
				expires.Format(time.RFC3339Nano), before.Add(total).Format(time.RFC3339Nano), after.Add(total).Format(time.RFC3339Nano))
		}
	}
	for _, durable := range []bool{true, false} {
		t.Run(fmt.Sprintf("question, checkpoints %v", durable), func(t *testing.T) {
			const message = "Export the whole archive."
			h := askMesh(t, 1, func(cfg *config.Config) { cfg.Durability.Checkpoints = durable }, exportScenario(message, "never asked"))
			before := time.Now()
			res := h.run(t, &agentv1.RunRequest{Message: message, Overrides: &agentv1.RunOverrides{TotalTimeoutMs: i64(total.Milliseconds())}})
			asking(t, res)
			within(t, res.GetPendingQuestion().GetExpiresAt().AsTime(), before, time.Now())
			final, kinds := h.finish(t, res.GetRunId())
			ended(t, final)
			if count(kinds, "input_answered") != 0 || len(requestsFor(h.llm, message)) != 1 {
				t.Errorf("events %v, %d LLM requests; want no answer and 1 request", kinds, len(requestsFor(h.llm, message)))
			}
			_, err := h.client.Answer(t.Context(), &agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: "too late"})
			wantCode(t, err, codes.NotFound, "an answer after the run's deadline")
			checkInvariants(t, final)
		})
		t.Run(fmt.Sprintf("approval, checkpoints %v", durable), func(t *testing.T) {
			const message = "Add it up, with approval."
			cfg := config.Default()
			cfg.Tools.RequireApproval = []string{"calculator"}
			cfg.Durability.Checkpoints = durable
			h := start(t, cfg, llmtest.Scenario{Match: message, Turns: []llmtest.Turn{calcTurn("c1", "1+1"), text("never asked")}})
			before := time.Now()
			res := h.run(t, &agentv1.RunRequest{Message: message, Overrides: &agentv1.RunOverrides{TotalTimeoutMs: i64(total.Milliseconds())}})
			paused(t, res, "c1")
			within(t, res.GetPendingAction().GetExpiresAt().AsTime(), before, time.Now())
			final, _ := h.finish(t, res.GetRunId())
			ended(t, final)
			_, err := h.client.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{
				RunId: res.GetRunId(), CallId: "c1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE})
			wantCode(t, err, codes.NotFound, "a decision after the run's deadline")
			if n := len(requestsFor(h.llm, message)); n != 1 || final.GetToolCalls() != 0 {
				t.Errorf("%d LLM requests, %d tool calls; want 1 and none", n, final.GetToolCalls())
			}
			checkInvariants(t, final)
		})
	}
}

// TestNoQuestionWhoseAnswerCannotHelp: recovery asks the user how to proceed with a result too
// large to read, but the turn ends the run at COMMIT whatever the answer (its tokens went
// over max_tokens_consumed; a malformed call used up max_format_retries): the run does not
// pause for an answer it would then throw away, but ends at once, as COMMIT says.
func TestNoQuestionWhoseAnswerCannotHelp(t *testing.T) {
	for _, tc := range []struct {
		name, message string
		turn          llmtest.Turn
		overrides     *agentv1.RunOverrides
		outcome       typev1.Outcome
		exit          string
	}{
		{"over max_tokens_consumed", "Export it, on a budget.", call("export", `{}`),
			&agentv1.RunOverrides{MaxTokensConsumed: i64(10)}, typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, orchestrator.ExitMaxTokens},
		{"max_format_retries used up", "Export it, and something broken.",
			llmtest.Turn{ToolCalls: []llmtest.ToolCall{{Name: "export", Arguments: `{}`}, {Name: "export", Arguments: `{"broken`}}},
			&agentv1.RunOverrides{MaxFormatRetries: i32(0), StrictMode: yes()}, typev1.Outcome_OUTCOME_FAILED_PROTOCOL_MALFORMED, orchestrator.ExitInvalidToolCall},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := askMesh(t, 1, nil, llmtest.Scenario{Match: tc.message, Turns: []llmtest.Turn{tc.turn, text("never asked")}})
			res := h.run(t, &agentv1.RunRequest{Message: tc.message, Overrides: tc.overrides})
			if res.GetOutcome() != tc.outcome || res.GetExitReason() != tc.exit || res.GetPendingQuestion() != nil {
				t.Fatalf("outcome %s %s (%v), question %v; want %s %s at once", res.GetOutcome(), res.GetExitReason(), res.GetError(),
					res.GetPendingQuestion(), tc.outcome, tc.exit)
			}
			if n := len(requestsFor(h.llm, tc.message)); n != 1 {
				t.Errorf("%d LLM requests, want 1", n)
			}
			checkInvariants(t, res)
		})
	}
}
