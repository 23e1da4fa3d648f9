package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The durability tests (issue 10) run agentmesh as separate processes — nats-server, the eight
// stages and two orchestrator replicas, "a" and "b" — kill and restart them with real signals,
// and read back what the runs left in JetStream and through the public API. They share the
// tools and helpers of this file.

// runTimeout bounds how long a run may take to finish once the test lets it.
const runTimeout = time.Minute

// takeoverTimeout bounds how long a run whose replica died waits for another replica to take it
// over: the dead replica's lease (meshproc.LeaseTTL) must expire first.
const takeoverTimeout = 10 * meshproc.LeaseTTL

// Tools of the durability meshes, all answered by one meshproc.ToolServer, which counts the
// executions of each call by its key argument.
const (
	// toolBump is a plain tool with a side effect.
	toolBump = "bump_counter"
	// toolIdempotentBump is declared idempotent (tools.idempotent): interrupted, it runs again.
	toolIdempotentBump = "bump_counter_idempotent"
	// toolGuardedBump needs approval (tools.require_approval).
	toolGuardedBump = "bump_counter_guarded"
)

// interruptedNotice is what the model sees of a call a crash interrupted mid-execution, when the
// tool is not idempotent (issue 10, item 3).
const interruptedNotice = "(tool failed: interrupted by a restart; it may or may not have run)"

// durableMesh starts the mesh the durability tests share: the scripted LLM llm, the three
// counting tools of tools, and two orchestrator replicas.
func durableMesh(t *testing.T, llm *llmtest.Server, tools *meshproc.ToolServer) *meshproc.Mesh {
	t.Helper()
	if testing.Short() {
		t.Skip("starts agentmesh as separate processes")
	}
	return meshproc.Start(t, meshproc.Options{Config: meshproc.Config{
		LLM: llm.URL(),
		RestTools: map[string]config.RestTool{
			toolBump:           tools.Tool("Counts one more request for the key."),
			toolIdempotentBump: tools.Tool("Counts one more request for the key; safe to repeat."),
			toolGuardedBump:    tools.Tool("Counts one more request for the key, once a person approves."),
		},
		RequireApproval: []string{toolGuardedBump},
		Idempotent:      []string{toolIdempotentBump},
	}})
}

// bumpCall is a scripted tool call of tool with the key argument.
func bumpCall(id, tool, key string) llmtest.ToolCall {
	return llmtest.ToolCall{ID: id, Name: tool, Arguments: `{"key":"` + key + `"}`}
}

// Why a replica took a run over (RunResumed.reason).
const (
	// leaseExpired: the replica running it died.
	leaseExpired = "lease expired"
	// handedOff: the replica running it shut down.
	handedOff = "handed off"
)

// checkSurvived asserts what every run that lost the replica running it must show, read through
// replica, a survivor: it was taken over for reason (its first run_resumed event says so), it
// finished exactly once with outcome want, its events are numbered 1, 2, 3 … with run_finished
// last, and its transcript verifies (with pkg/transcript and `agentmesh transcript verify`) and
// records the take-over (RUN_STATE_RESUMED). It returns the run's result.
func checkSurvived(t *testing.T, m *meshproc.Mesh, replica *meshproc.Service, runID, reason string, want typev1.Outcome) *typev1.RunResult {
	t.Helper()
	if got := m.WaitEvent(t, runID, "run_resumed", takeoverTimeout).GetRunResumed(); got.GetReason() != reason {
		t.Errorf("run %s: the first take-over was %v, want one for the reason %q", runID, got, reason)
	}
	m.WaitEvent(t, runID, "run_finished", runTimeout)
	res := finishedRun(t, replica, runID)
	if res.GetOutcome() != want {
		t.Errorf("run %s ended %s %s, want %s (error %v)", runID, res.GetOutcome(), res.GetExitReason(), want, res.GetError())
	}
	checkEventLog(t, m, runID)
	checkTranscript(t, replica, res)
	if !slices.ContainsFunc(res.GetTranscript(), func(e *typev1.TranscriptEntry) bool {
		return e.GetState() == typev1.RunState_RUN_STATE_RESUMED
	}) {
		t.Errorf("run %s: the transcript has no RESUMED entry: %v", runID, states(res.GetTranscript()))
	}
	return res
}

// checkEventLog asserts the stored events of a finished run: seq 1, 2, 3 … without gaps or
// repeats, and exactly one run_finished, the last.
func checkEventLog(t *testing.T, m *meshproc.Mesh, runID string) {
	t.Helper()
	// A caller on another replica gets the result from the run's finished checkpoint, which is
	// stored before run_finished is published.
	m.WaitEvent(t, runID, "run_finished", runTimeout)
	if n := m.CountEvents(t, runID, "run_finished"); n != 1 {
		t.Errorf("run %s: %d run_finished events stored, want exactly 1", runID, n)
	}
	evs := m.StoredEvents(t, runID)
	for i, ev := range evs {
		if ev.GetSeq() != uint64(i+1) {
			t.Errorf("run %s: stored event %d (%s) has seq %d, want %d", runID, i+1, events.Kind(ev), ev.GetSeq(), i+1)
			break
		}
	}
	if len(evs) == 0 || evs[len(evs)-1].GetRunFinished() == nil {
		t.Errorf("run %s: the last stored event is not run_finished: %v", runID, kinds(evs))
	}
}

// checkTranscript verifies a run's hash chain in the test and with the CLI against replica.
func checkTranscript(t *testing.T, replica *meshproc.Service, res *typev1.RunResult) {
	t.Helper()
	if err := transcript.VerifyResult(res); err != nil {
		t.Errorf("run %s: transcript does not verify: %v", res.GetRunId(), err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"transcript", "verify", "--addr", replica.Addr(), res.GetRunId()}, &stdout, &stderr); code != 0 {
		t.Errorf("agentmesh transcript verify %s: exit %d: %s%s", res.GetRunId(), code, stdout.String(), stderr.String())
	}
}

// finishedRun polls GetRun on replica until it returns the run's final result. A run not
// finished yet (FAILED_PRECONDITION, or a pause), not stored yet (NOT_FOUND) or a replica that
// is restarting (UNAVAILABLE) is polled again; it fails t after runTimeout.
func finishedRun(t *testing.T, replica *meshproc.Service, runID string) *typev1.RunResult {
	t.Helper()
	var last string
	done := poll(t, runTimeout, func() bool {
		res, err := replica.Agent().GetRun(t.Context(), &agentv1.GetRunRequest{RunId: runID})
		switch status.Code(err) {
		case codes.OK:
			last = res.GetOutcome().String()
			return res.GetOutcome() != typev1.Outcome_OUTCOME_UNSPECIFIED && res.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL
		case codes.FailedPrecondition, codes.NotFound, codes.Unavailable:
			last = err.Error()
			return false
		}
		t.Fatalf("GetRun(%s) on %s: %v", runID, replica.Name(), err)
		return false
	})
	if !done {
		t.Fatalf("run %s did not finish within %s on %s: last GetRun: %s", runID, runTimeout, replica.Name(), last)
	}
	res, err := replica.Agent().GetRun(t.Context(), &agentv1.GetRunRequest{RunId: runID})
	if err != nil {
		t.Fatalf("GetRun(%s) on %s: %v", runID, replica.Name(), err)
	}
	return res
}

// toolMessages returns the contents of the run's tool messages for the call.
func toolMessages(res *typev1.RunResult, callID string) []string {
	var out []string
	for _, m := range res.GetConversation() {
		if m.GetRole() == typev1.Role_ROLE_TOOL && m.GetToolCallId() == callID {
			out = append(out, m.GetContent())
		}
	}
	return out
}

// checkToolSaw asserts that the model was told exactly one result for the call, and that it
// contains one of want.
func checkToolSaw(t *testing.T, res *typev1.RunResult, callID string, want ...string) {
	t.Helper()
	got := toolMessages(res, callID)
	for _, w := range want {
		if len(got) == 1 && strings.Contains(got[0], w) {
			return
		}
	}
	t.Errorf("run %s: the model saw %q for call %s, want one result containing one of %q", res.GetRunId(), got, callID, want)
}

// llmRequests returns how many requests the scripted LLM received for turn (0-based: the
// number of assistant messages the request holds) of the conversation that starts with first.
func llmRequests(llm *llmtest.Server, first string, turn int) int {
	n := 0
	for _, r := range llm.Requests() {
		if firstUserMessage(r) == first && roleCount(r, "assistant") == turn {
			n++
		}
	}
	return n
}

// firstUserMessage returns the content of the request's first user message.
func firstUserMessage(r llmtest.Request) string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return string(m.Content)
		}
	}
	return ""
}

// roleCount returns how many of the request's messages have the role.
func roleCount(r llmtest.Request, role string) int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == role {
			n++
		}
	}
	return n
}

// pendingRun is a Run going on in the background.
type pendingRun struct {
	done chan struct{}
	res  *typev1.RunResult
	err  error
}

// goRun calls run in the background.
func goRun(run func() (*typev1.RunResult, error)) *pendingRun {
	p := &pendingRun{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.res, p.err = run()
	}()
	return p
}

// retrying returns a Run of req through client, starting on the replica at index first and
// retrying UNAVAILABLE on the next ones, for goRun.
func retrying(ctx context.Context, client *meshproc.Client, first int, req *agentv1.RunRequest) func() (*typev1.RunResult, error) {
	return func() (*typev1.RunResult, error) {
		res, failed, err := client.Run(ctx, first, req)
		if err != nil {
			return nil, fmt.Errorf("%w (after UNAVAILABLE from %v)", err, failed)
		}
		return res, nil
	}
}

// check waits for the run's answer and asserts that it is the run runID with outcome want.
func (p *pendingRun) check(t *testing.T, runID string, want typev1.Outcome) {
	t.Helper()
	await(t, p.done, 2*runTimeout, "Run to return")
	if p.err != nil {
		t.Errorf("Run of %s failed: %v", runID, p.err)
		return
	}
	if p.res.GetRunId() != runID || p.res.GetOutcome() != want {
		t.Errorf("Run returned run %s %s, want run %s %s", p.res.GetRunId(), p.res.GetOutcome(), runID, want)
	}
}

// streamEnd is how a stream of run events ended.
type streamEnd struct {
	done   chan struct{}
	events []*eventv1.RunEvent
	err    error // nil when the stream ended normally
}

// follow reads stream in the background until it ends.
func follow(stream grpc.ServerStreamingClient[eventv1.RunEvent]) *streamEnd {
	e := &streamEnd{done: make(chan struct{})}
	go func() {
		defer close(e.done)
		for {
			ev, err := stream.Recv()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					e.err = err
				}
				return
			}
			e.events = append(e.events, ev)
		}
	}()
	return e
}

// last returns the last event received, or nil.
func (e *streamEnd) last() *eventv1.RunEvent {
	if len(e.events) == 0 {
		return nil
	}
	return e.events[len(e.events)-1]
}

// lastEvent reads a stream of run events to its end and returns the last event; it fails t
// when the stream ends with an error or does not end within runTimeout.
func lastEvent(t *testing.T, stream grpc.ServerStreamingClient[eventv1.RunEvent]) *eventv1.RunEvent {
	t.Helper()
	end := follow(stream)
	await(t, end.done, runTimeout, "the stream to end")
	if end.err != nil {
		t.Fatalf("the stream ended with %v after %v", end.err, kinds(end.events))
	}
	return end.last()
}

// poll calls cond every few milliseconds until it holds, and reports whether it did within
// timeout.
func poll(t *testing.T, timeout time.Duration, cond func() bool) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// await waits up to timeout for ch to be closed, failing t with what it waited for.
func await(t *testing.T, ch <-chan struct{}, timeout time.Duration, what string) {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatalf("waited %s for %s", timeout, what)
	}
}

// kinds returns the kinds of events, in order.
func kinds(evs []*eventv1.RunEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = events.Kind(ev)
	}
	return out
}

// states returns the states of transcript entries, in order.
func states(entries []*typev1.TranscriptEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = strings.TrimPrefix(e.GetState().String(), "RUN_STATE_")
	}
	return out
}
