package main

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// crashPoint is a point of the decision loop where TestCrashPoints kills the replica running a
// run, and what the run must show once the other replica has finished it.
type crashPoint struct {
	name string
	// tool is the tool the model calls, once, in the run's first turn.
	tool string
	// holdInfer holds the first inference until the kill.
	holdInfer bool
	// holdTool holds the tool's execution (c.toolHold) until it is released or its client
	// goes away.
	holdTool bool
	// crash waits until the run on replica a reaches the point, then kills a (and, for a
	// pause, resolves it on b).
	crash func(t *testing.T, c *crashRun)
	// executions is how many times the tool must have run in the end.
	executions int
	// result is the execution whose answer the model must have been told, exactly once (1 for
	// the first); 0 when it must have been told interruptedNotice instead.
	result int
	// orInterrupted accepts interruptedNotice too: the kill may or may not cut the execution.
	orInterrupted bool
	// check, when set, asserts more of the finished run.
	check func(t *testing.T, c *crashRun, res *typev1.RunResult)
}

// crashRun is one run of TestCrashPoints.
type crashRun struct {
	m        *meshproc.Mesh
	llm      *llmtest.Server
	a, b     *meshproc.Service
	runID    string
	message  string
	key      string
	toolHold *meshproc.Hold
}

// crashCallID is the id of the one tool call of each crash run.
const crashCallID = "call-1"

// TestCrashPoints proves issue 10's central promise with kill -9: a run survives the death of
// the orchestrator replica running it at any point of a turn, and no tool runs twice. Each case
// starts a run on replica a through a client that, like one behind a load balancer, retries
// UNAVAILABLE on b with the same idempotency key; waits until the run reaches its point; kills a
// with SIGKILL; and lets b take the run over once a's lease expires. Every run must then finish
// exactly once (one run_finished in AGENTMESH_RUNS, the last of gap-free seqs), with the
// expected outcome on b and for the retrying client, a transcript that verifies and records
// RUN_STATE_RESUMED, a run_resumed event, and the tool's side-effect counter equal to the
// number of executions the durability model allows: one per distinct call, two only for a tool
// declared idempotent that the crash interrupted.
//
// The model's final answer is held until a is dead, so no run can finish on a before the kill,
// wherever it lands.
func TestCrashPoints(t *testing.T) {
	points := []crashPoint{
		{
			// The kill lands while the model is answering: the answer is lost with a, and b
			// asks again (LLM calls may repeat on resume), then runs the tool once.
			name: "during INFER", tool: toolBump, holdInfer: true,
			crash: func(t *testing.T, c *crashRun) {
				if !poll(t, runTimeout, func() bool { return llmRequests(c.llm, c.message, 0) > 0 }) {
					t.Fatal("the first inference never reached the LLM")
				}
				c.a.Kill(t)
			},
			executions: 1, result: 1,
			check: func(t *testing.T, c *crashRun, _ *typev1.RunResult) {
				if n := llmRequests(c.llm, c.message, 0); n < 2 {
					t.Errorf("the first turn was inferred %d times, want it inferred again after the crash", n)
				}
			},
		},
		{
			// The kill lands after the model's answer was announced, anywhere from before the
			// tool's execution to the next inference: whichever it is, the tool ran once, and
			// the model saw its result or, if the kill cut the execution, the interrupted
			// notice.
			name: "after INFER", tool: toolBump,
			crash: func(t *testing.T, c *crashRun) {
				c.m.WaitEvent(t, c.runID, "llm_response", runTimeout)
				c.a.Kill(t)
			},
			executions: 1, result: 1, orInterrupted: true,
		},
		{
			// The kill lands while the tool runs, and takes the action stage running it along
			// (one node going down): the call is recorded as started and never done, by an
			// instance whose heartbeat stops, so b does not run it again and tells the model
			// it may or may not have run.
			name: "during EXECUTE", tool: toolBump, holdTool: true,
			crash: func(t *testing.T, c *crashRun) {
				await(t, c.toolHold.Arrived(), runTimeout, "the tool's execution")
				killActionToo(t, c)
			},
			executions: 1, result: 0,
		},
		{
			// The same kill for a tool declared idempotent: b runs it again.
			name: "during EXECUTE of an idempotent tool", tool: toolIdempotentBump, holdTool: true,
			crash: func(t *testing.T, c *crashRun) {
				await(t, c.toolHold.Arrived(), runTimeout, "the tool's execution")
				killActionToo(t, c)
			},
			executions: 2, result: 2,
		},
		{
			// Only a dies while the tool runs; the action stage lives on and finishes the
			// execution: b waits for it and the model sees its result, from one execution.
			name: "during EXECUTE with the action stage surviving", tool: toolBump, holdTool: true,
			crash: func(t *testing.T, c *crashRun) {
				await(t, c.toolHold.Arrived(), runTimeout, "the tool's execution")
				c.a.Kill(t)
				c.toolHold.Release()
			},
			executions: 1, result: 1,
		},
		{
			// The tool finished and the action stage recorded its result, but a never saw it:
			// a is frozen (SIGSTOP) while the tool runs and killed once the result is
			// recorded. b's execution of the call returns the recorded result without running
			// the tool.
			name: "after EXECUTE before COMMIT", tool: toolBump, holdTool: true,
			crash: func(t *testing.T, c *crashRun) {
				await(t, c.toolHold.Arrived(), runTimeout, "the tool's execution")
				c.a.Signal(t, syscall.SIGSTOP)
				c.toolHold.Release()
				c.m.WaitCallRecord(t, c.runID, crashCallID, actionv1.CallState_CALL_STATE_DONE, takeoverTimeout)
				c.a.Kill(t)
			},
			executions: 1, result: 1,
		},
		{
			// The kill lands once the tool's result was announced (tool_finished), before or
			// after the turn's COMMIT: b continues with the result, from the checkpoint or the
			// action stage's record.
			name: "after tool_finished", tool: toolBump,
			crash: func(t *testing.T, c *crashRun) {
				c.m.WaitEvent(t, c.runID, "tool_finished", runTimeout)
				c.a.Kill(t)
			},
			executions: 1, result: 1,
		},
		{
			// The run is paused for approval when a dies; the person approves on b, which
			// resumes the run from its paused checkpoint and runs the tool once.
			name: "paused for approval", tool: toolGuardedBump,
			crash: func(t *testing.T, c *crashRun) {
				c.m.WaitEvent(t, c.runID, "approval_requested", runTimeout)
				c.a.Kill(t)
				resp, err := c.b.Agent().ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{
					RunId: c.runID, CallId: crashCallID, Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE,
				})
				if err != nil {
					t.Fatalf("ResolveApproval on b after a died: %v", err)
				}
				if !resp.GetResumed() || len(resp.GetPendingCallIds()) != 0 {
					t.Errorf("ResolveApproval = %v, want the run resumed with nothing pending", resp)
				}
			},
			executions: 1, result: 1,
		},
	}

	inferHolds, answerHolds := map[string]chan struct{}{}, map[string]chan struct{}{}
	var scenarios []llmtest.Scenario
	for _, p := range points {
		inferHolds[p.name], answerHolds[p.name] = make(chan struct{}), make(chan struct{})
		first := llmtest.Turn{ToolCalls: []llmtest.ToolCall{bumpCall(crashCallID, p.tool, slug(p.name))}}
		if p.holdInfer {
			first.Hold = inferHolds[p.name]
		}
		scenarios = append(scenarios, llmtest.Scenario{Name: p.name, Match: "crash: " + p.name, Turns: []llmtest.Turn{
			first,
			{Content: "Done after the crash " + p.name + ".", Hold: answerHolds[p.name]},
		}})
	}
	llm := llmtest.New(t, scenarios...)
	tools := meshproc.NewToolServer(t)
	m := durableMesh(t, llm, tools)
	a, b := m.Replica(t, "a"), m.Replica(t, "b")

	for _, p := range points {
		t.Run(p.name, func(t *testing.T) {
			if !a.Running() {
				a.Restart(t) // the previous case killed it
			}
			t.Cleanup(func() {
				if a.Running() { // the case failed before its kill, maybe with a frozen
					a.Kill(t)
				}
			})
			c := &crashRun{m: m, llm: llm, a: a, b: b, runID: "crash-" + slug(p.name), message: "crash: " + p.name, key: slug(p.name)}
			if p.holdTool {
				c.toolHold = tools.Hold(c.key)
				t.Cleanup(c.toolHold.Release)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*runTimeout)
			defer cancel()
			client := goRun(retrying(ctx, m.Client(), 0, &agentv1.RunRequest{RunId: c.runID, IdempotencyKey: c.runID, Message: c.message}))

			p.crash(t, c)
			close(inferHolds[p.name])
			close(answerHolds[p.name])

			res := checkSurvived(t, m, b, c.runID, leaseExpired, typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS)
			if by := m.WaitEvent(t, c.runID, "run_resumed", runTimeout).GetRunResumed().GetReplica(); by != "b" {
				t.Errorf("the run was taken over by replica %q, want b (AGENTMESH_REPLICA)", by)
			}
			if n := tools.Count(c.key); n != p.executions {
				t.Errorf("the tool ran %d times, want %d", n, p.executions)
			}
			var saw []string
			if p.result > 0 {
				saw = append(saw, meshproc.Answer(c.key, p.result))
			}
			if p.result == 0 || p.orInterrupted {
				saw = append(saw, interruptedNotice)
			}
			checkToolSaw(t, res, crashCallID, saw...)
			wantClient := typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS
			if p.tool == toolGuardedBump {
				wantClient = typev1.Outcome_OUTCOME_AWAITING_APPROVAL // Run returns at the pause
			}
			client.check(t, c.runID, wantClient)
			if p.check != nil {
				p.check(t, c, res)
			}
		})
	}
}

// slug turns a case name into a run id and a tool key: "during INFER" → "during-infer".
func slug(name string) string {
	return strings.ToLower(strings.NewReplacer(" ", "-", "_", "-").Replace(name))
}

// killActionToo kills replica a and the action stage with it, as when the node running both
// goes down, and starts the action stage again.
func killActionToo(t *testing.T, c *crashRun) {
	t.Helper()
	c.a.Kill(t)
	action := c.m.Stage(t, "action")
	action.Kill(t)
	action.Restart(t)
}
