package stagetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
)

// Limits of the public API's requests (README, "Limits").
const (
	maxMessageBytes     = 64 << 10
	maxUserIDBytes      = 256
	maxMemoriesPageSize = 500
)

// toolQuestion is a question the rules model answers with a calculator call, then with the
// calculator's result, 42.
const toolQuestion = "What is 6 times 7?"

// rulesTargets make a run ask the generation stage's built-in rules model, whatever the
// deployment's configured targets are.
var rulesTargets = []*typev1.Target{{Provider: "rules", Model: "rules-v1"}}

var orchestratorCases = []testCase{
	{"run-completes", `Run "What is 6 times 7?" on the rules model completes with tools: success, the requested run_id, a final report holding 42, a transcript that verifies, and a contract whose stream_answers is false (Run does not stream a run's answers)`,
		func(ctx context.Context, k *kit) error {
			res, err := agent(k).Run(ctx, toolRun(k.id("run")))
			if err != nil {
				return wantOK(err)
			}
			return checkToolRun(res, k.id("run"), false)
		}},
	{"stream-run", "StreamRun of the same question streams one run's events, seq 1, 2, 3 …, run_started first and run_finished last with that result, whose contract's stream_answers is true",
		func(ctx context.Context, k *kit) error {
			stream, err := agent(k).StreamRun(ctx, toolRun(k.id("stream")))
			if err != nil {
				return wantOK(err)
			}
			evs, err := drain(stream)
			if err != nil {
				return fmt.Errorf("the stream failed after %d events: %w", len(evs), wantOK(err))
			}
			if err := checkEvents(evs, k.id("stream")); err != nil {
				return err
			}
			return checkToolRun(evs[len(evs)-1].GetRunFinished().GetResult(), k.id("stream"), true)
		}},
	{"get-run", "GetRun after Run returns the run's outcome, exit reason, final report and transcript",
		func(ctx context.Context, k *kit) error {
			res, err := agent(k).Run(ctx, toolRun(k.id("get")))
			if err != nil {
				return fmt.Errorf("Run: %w", wantOK(err))
			}
			got, err := agent(k).GetRun(ctx, &agentv1.GetRunRequest{RunId: res.GetRunId()})
			if err != nil {
				return wantOK(err)
			}
			return sameRun(got, res)
		}},
	{"empty-input", "Run of a blank message ends FAILED_PREFLIGHT / EMPTY_INPUT: no LLM call, no turn, no final report content, a transcript that verifies",
		func(ctx context.Context, k *kit) error {
			res, err := emptyRun(ctx, k, k.id("empty"))
			if err != nil {
				return wantOK(err)
			}
			var p problems
			if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PREFLIGHT || res.GetExitReason() != "EMPTY_INPUT" || res.GetSuccess() {
				p.addf("ended %s / %s success=%v, want OUTCOME_FAILED_PREFLIGHT / EMPTY_INPUT success=false", res.GetOutcome(), res.GetExitReason(), res.GetSuccess())
			}
			if n := len(res.GetAccounting()); n != 0 || res.GetTurns() != 0 || res.GetUsage().GetTotal() != 0 {
				p.addf("%d accounting entries, %d turns, %d tokens: a blank message costs nothing", n, res.GetTurns(), res.GetUsage().GetTotal())
			}
			if c := res.GetFinalReport().GetContent(); c != "" {
				p.addf("final report %q, want none (the client prompts for input)", c)
			}
			if err := transcript.VerifyResult(res); err != nil {
				p.addf("the transcript does not verify: %v", err)
			}
			return p.err()
		}},
	{"run-id-taken", "Run with the run_id of a run that exists is ALREADY_EXISTS",
		func(ctx context.Context, k *kit) error {
			if _, err := emptyRun(ctx, k, k.id("taken")); err != nil {
				return fmt.Errorf("the first run: %w", wantOK(err))
			}
			_, err := emptyRun(ctx, k, k.id("taken"))
			return wantFailure(err, codes.AlreadyExists, typev1.StageErrorCode_STAGE_ERROR_CODE_ALREADY_EXISTS)
		}},
	{"idempotency-key", "Run again with the same idempotency_key returns the first run, not a new one; another request with the key is INVALID_ARGUMENT naming it",
		func(ctx context.Context, k *kit) error {
			req := &agentv1.RunRequest{Message: " ", IdempotencyKey: k.id("key")}
			first, err := agent(k).Run(ctx, req)
			if err != nil {
				return fmt.Errorf("the first run: %w", wantOK(err))
			}
			again, err := agent(k).Run(ctx, req)
			if err != nil {
				return wantOK(err)
			}
			if first.GetRunId() == "" {
				return errors.New("the run has no run_id")
			}
			if again.GetRunId() != first.GetRunId() {
				return fmt.Errorf("the repeated request ran %q, want the first run %q", again.GetRunId(), first.GetRunId())
			}
			_, err = agent(k).Run(ctx, &agentv1.RunRequest{Message: "\t", IdempotencyKey: req.GetIdempotencyKey()})
			if err := wantInvalid(err, "idempotency_key"); err != nil {
				return fmt.Errorf("another request with the key: %w", err)
			}
			return nil
		}},
	{"watch-run", "WatchRun of a finished run replays its events from seq 1 to run_finished",
		func(ctx context.Context, k *kit) error {
			res, err := emptyRun(ctx, k, k.id("watch"))
			if err != nil {
				return fmt.Errorf("Run: %w", wantOK(err))
			}
			stream, err := agent(k).WatchRun(ctx, &agentv1.WatchRunRequest{RunId: res.GetRunId()})
			if err != nil {
				return wantOK(err)
			}
			evs, err := drain(stream)
			if err != nil {
				return fmt.Errorf("the stream failed after %d events: %w", len(evs), wantOK(err))
			}
			if err := checkEvents(evs, res.GetRunId()); err != nil {
				return err
			}
			if got := evs[len(evs)-1].GetRunFinished().GetResult().GetOutcome(); got != res.GetOutcome() {
				return fmt.Errorf("run_finished says %s, the run ended %s", got, res.GetOutcome())
			}
			return nil
		}},
	{"cancel-finished-run", "CancelRun of a finished run (a blank message's, " +
		"OUTCOME_FAILED_PREFLIGHT) answers the run's id, cancelled=false and that outcome",
		func(ctx context.Context, k *kit) error {
			res, err := emptyRun(ctx, k, k.id("cancel"))
			if err != nil {
				return fmt.Errorf("Run: %w", wantOK(err))
			}
			// Else an API that keeps no runs passes: its empty answers agree on no outcome.
			preflight := typev1.Outcome_OUTCOME_FAILED_PREFLIGHT
			if res.GetRunId() != k.id("cancel") || res.GetOutcome() != preflight {
				return fmt.Errorf("the blank message's run %q ended %s, want run %q ended %s",
					res.GetRunId(), res.GetOutcome(), k.id("cancel"), preflight)
			}
			resp, err := agent(k).CancelRun(ctx, &agentv1.CancelRunRequest{RunId: res.GetRunId(), Reason: "stagetest"})
			if err != nil {
				return wantOK(err)
			}
			if resp.GetRunId() != res.GetRunId() || resp.GetCancelled() ||
				resp.GetOutcome() != res.GetOutcome() {
				return fmt.Errorf("run %q cancelled=%v outcome %s, want run %q cancelled=false and %s",
					resp.GetRunId(), resp.GetCancelled(), resp.GetOutcome(), res.GetRunId(), res.GetOutcome())
			}
			return nil
		}},
	{"approve-finished-run", "ResolveApproval of a run with no call waiting (a finished run) is NOT_FOUND",
		func(ctx context.Context, k *kit) error {
			res, err := emptyRun(ctx, k, k.id("approve"))
			if err != nil {
				return fmt.Errorf("Run: %w", wantOK(err))
			}
			_, err = agent(k).ResolveApproval(ctx, &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c1",
				Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE})
			return wantFailure(err, codes.NotFound, typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND)
		}},
	{"answer-finished-run", "Answer to a run that asks no question (a finished run) is NOT_FOUND",
		func(ctx context.Context, k *kit) error {
			res, err := emptyRun(ctx, k, k.id("answer"))
			if err != nil {
				return fmt.Errorf("Run: %w", wantOK(err))
			}
			_, err = agent(k).Answer(ctx, &agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: "yes"})
			return wantFailure(err, codes.NotFound, typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND)
		}},
	{"get-unknown-run", "GetRun of a run that never existed is NOT_FOUND",
		func(ctx context.Context, k *kit) error {
			_, err := agent(k).GetRun(ctx, &agentv1.GetRunRequest{RunId: k.id("never")})
			return wantFailure(err, codes.NotFound, typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND)
		}},
	{"cancel-unknown-run", "CancelRun of a run that never existed is NOT_FOUND",
		func(ctx context.Context, k *kit) error {
			_, err := agent(k).CancelRun(ctx, &agentv1.CancelRunRequest{RunId: k.id("never")})
			return wantFailure(err, codes.NotFound, typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND)
		}},
	{"watch-unknown-run", "WatchRun of a run that never existed is NOT_FOUND",
		func(ctx context.Context, k *kit) error {
			stream, err := agent(k).WatchRun(ctx, &agentv1.WatchRunRequest{RunId: k.id("never")})
			if err == nil {
				var ev *eventv1.RunEvent
				if ev, err = stream.Recv(); err == nil {
					return fmt.Errorf("answered a %s event, want NOT_FOUND", events.Kind(ev))
				}
			}
			return wantFailure(err, codes.NotFound, typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND)
		}},
	{"delete-unknown-memory", "DeleteMemory of a memory the caller does not hold is NOT_FOUND",
		func(ctx context.Context, k *kit) error {
			_, err := agent(k).DeleteMemory(ctx, &agentv1.DeleteMemoryRequest{MemoryId: uuid.NewString()})
			return wantFailure(err, codes.NotFound, typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND)
		}},
	{"lists-builtins", "ListTools lists calculator and current_time, every tool with a unique non-empty name and an object input schema",
		func(ctx context.Context, k *kit) error {
			resp, err := agent(k).ListTools(ctx, &agentv1.ListToolsRequest{})
			if err != nil {
				return wantOK(err)
			}
			p := checkTools(resp.GetTools())
			for _, t := range resp.GetTools() {
				if typ := t.GetInputSchema().GetFields()["type"].GetStringValue(); typ != "object" {
					p.addf("tool %q has input schema type %q, want object", t.GetName(), typ)
				}
			}
			return p.err()
		}},
	{"decide-empty-message", "Decide with an empty message is INVALID_ARGUMENT naming message",
		func(ctx context.Context, k *kit) error {
			_, err := agent(k).Decide(ctx, &agentv1.DecideRequest{})
			return wantInvalid(err, "message")
		}},
	{"message-over-limit", "a message of 64 KiB + 1 byte is INVALID_ARGUMENT naming message",
		invalidRun(&agentv1.RunRequest{Message: strings.Repeat("a", maxMessageBytes+1)}, "message")},
	{"user-id-over-limit", "a user_id of 257 bytes is INVALID_ARGUMENT naming user_id",
		invalidRun(&agentv1.RunRequest{Message: "hi", UserId: strings.Repeat("u", maxUserIDBytes+1)}, "user_id")},
	{"unknown-output-format", "an output_format that is not one of its values is INVALID_ARGUMENT naming output_format",
		invalidRun(&agentv1.RunRequest{Message: "hi", OutputFormat: 99}, "output_format")},
	{"malformed-run-id", `a run_id with a "." is INVALID_ARGUMENT naming run_id`,
		invalidRun(&agentv1.RunRequest{Message: "hi", RunId: "stagetest.run"}, "run_id")},
	{"history-without-role", "a history message without a role is INVALID_ARGUMENT naming history[0].role",
		invalidRun(&agentv1.RunRequest{Message: "hi", History: []*typev1.Message{{Content: "x"}}}, "history[0].role")},
	{"memories-page-size-over-limit", "a ListMemories page_size of 501 is INVALID_ARGUMENT naming page_size",
		func(ctx context.Context, k *kit) error {
			_, err := agent(k).ListMemories(ctx, &agentv1.ListMemoriesRequest{PageSize: maxMemoriesPageSize + 1})
			return wantInvalid(err, "page_size")
		}},
	{"get-without-run-id", "GetRun without a run_id is INVALID_ARGUMENT naming run_id",
		func(ctx context.Context, k *kit) error {
			_, err := agent(k).GetRun(ctx, &agentv1.GetRunRequest{})
			return wantInvalid(err, "run_id")
		}},
	{"unknown-approval-decision", "a ResolveApproval decision that is not one of its values is INVALID_ARGUMENT naming decision",
		func(ctx context.Context, k *kit) error {
			_, err := agent(k).ResolveApproval(ctx, &agentv1.ResolveApprovalRequest{RunId: k.id("never"), CallId: "c1", Decision: 99})
			return wantInvalid(err, "decision")
		}},
	{"empty-answer", "an empty Answer is INVALID_ARGUMENT naming answer",
		func(ctx context.Context, k *kit) error {
			_, err := agent(k).Answer(ctx, &agentv1.AnswerRequest{RunId: k.id("never"), Answer: " "})
			return wantInvalid(err, "answer")
		}},
}

func agent(k *kit) agentv1.AgentServiceClient { return agentv1.NewAgentServiceClient(k.conn) }

// toolRun is a request for toolQuestion on the rules model, as run runID.
func toolRun(runID string) *agentv1.RunRequest {
	return &agentv1.RunRequest{Message: toolQuestion, RunId: runID, Overrides: &agentv1.RunOverrides{Targets: rulesTargets}}
}

// emptyRun runs a blank message as run runID: a run that ends before any stage is asked.
func emptyRun(ctx context.Context, k *kit, runID string) (*typev1.RunResult, error) {
	return agent(k).Run(ctx, &agentv1.RunRequest{Message: " \n\t", RunId: runID})
}

// invalidRun is a case whose Run request is INVALID_ARGUMENT naming field. The request asks
// the rules model, so that an orchestrator that runs it anyway runs it at no cost.
func invalidRun(req *agentv1.RunRequest, field string) func(context.Context, *kit) error {
	req.Overrides = &agentv1.RunOverrides{Targets: rulesTargets}
	return func(ctx context.Context, k *kit) error {
		_, err := agent(k).Run(ctx, req)
		return wantInvalid(err, field)
	}
}

// checkToolRun returns how res differs from the result of toolRun(runID), started with StreamRun
// (streamed) or Run.
func checkToolRun(res *typev1.RunResult, runID string, streamed bool) error {
	var p problems
	if got := res.GetContract().GetStreamAnswers(); got != streamed {
		p.addf("contract stream_answers %v, want %v: StreamRun streams a run's answers, Run does not", got, streamed)
	}
	if res.GetRunId() != runID {
		p.addf("run_id %q, want the requested %q", res.GetRunId(), runID)
	}
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS || !res.GetSuccess() {
		p.addf("ended %s / %s success=%v (%s), want OUTCOME_COMPLETED_WITH_TOOLS success=true",
			res.GetOutcome(), res.GetExitReason(), res.GetSuccess(), res.GetError().GetMessage())
	}
	if r := res.GetFinalReport(); !strings.Contains(r.GetContent(), "42") || r.GetStatus() != typev1.ReportStatus_REPORT_STATUS_SUCCESS {
		p.addf("final report %s %q, want REPORT_STATUS_SUCCESS holding 42", r.GetStatus(), r.GetContent())
	}
	if res.GetToolCalls() < 1 {
		p.addf("tool_calls %d, want the calculator's call counted", res.GetToolCalls())
	}
	if res.GetContract().GetContractHash() == "" {
		p.addf("the contract has no hash")
	}
	if err := transcript.VerifyResult(res); err != nil {
		p.addf("the transcript does not verify: %v", err)
	}
	return p.err()
}

// sameRun returns how got, a run's result read back, differs from res, the one Run answered.
func sameRun(got, res *typev1.RunResult) error {
	var p problems
	if got.GetRunId() != res.GetRunId() || got.GetOutcome() != res.GetOutcome() || got.GetExitReason() != res.GetExitReason() {
		p.addf("run %q %s / %s, Run answered %q %s / %s", got.GetRunId(), got.GetOutcome(), got.GetExitReason(),
			res.GetRunId(), res.GetOutcome(), res.GetExitReason())
	}
	if got.GetFinalReport().GetContent() != res.GetFinalReport().GetContent() {
		p.addf("final report %q, Run answered %q", got.GetFinalReport().GetContent(), res.GetFinalReport().GetContent())
	}
	if head, want := transcriptHead(got), transcriptHead(res); head != want {
		p.addf("transcript head %q, Run answered %q", head, want)
	}
	if err := transcript.VerifyResult(got); err != nil {
		p.addf("the transcript does not verify: %v", err)
	}
	return p.err()
}

// transcriptHead is the hash of a result's last transcript entry.
func transcriptHead(res *typev1.RunResult) string {
	entries := res.GetTranscript()
	if len(entries) == 0 {
		return ""
	}
	return entries[len(entries)-1].GetHash()
}

// eventStream is a stream of a run's events (StreamRun, WatchRun).
type eventStream interface {
	Recv() (*eventv1.RunEvent, error)
}

// drain reads a stream's events until it ends.
func drain(stream eventStream) ([]*eventv1.RunEvent, error) {
	var evs []*eventv1.RunEvent
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

// checkEvents returns how evs differ from the whole of run runID's events: seq 1, 2, 3 …,
// run_started first, run_finished last.
func checkEvents(evs []*eventv1.RunEvent, runID string) error {
	if len(evs) == 0 {
		return errors.New("no events")
	}
	var p problems
	for i, ev := range evs {
		if ev.GetRunId() != runID {
			p.addf("event %d is of run %q, want %q", i+1, ev.GetRunId(), runID)
		}
		if ev.GetSeq() != uint64(i+1) {
			p.addf("event %d (%s) has seq %d, want %d", i+1, events.Kind(ev), ev.GetSeq(), i+1)
			break
		}
	}
	if ev := evs[0]; ev.GetRunStarted() == nil {
		p.addf("the first event is %s, want run_started", events.Kind(ev))
	}
	if ev := evs[len(evs)-1]; ev.GetRunFinished().GetResult() == nil {
		p.addf("the last event is %s, want run_finished with the result", events.Kind(ev))
	}
	return p.err()
}
