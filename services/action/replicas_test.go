package action_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/action"
	"github.com/agentmesh/agentmesh/services/action/internal/mcptest"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// interrupted is the error of a call whose execution died, as the model sees it inside
// "(tool failed: …)".
const interrupted = "interrupted by a restart; it may or may not have run"

// replica serves one replica of the action stage with its own connection to srv's ledger.
func replica(t *testing.T, srv *events.Embedded, opts action.Options) actionv1.ActionServiceClient {
	t.Helper()
	opts.Ledger = kvLedger(t, srv, action.KVLedgerOptions{})
	return serve(t, opts)
}

// started is the record a replica writes before running req's tool, at time at.
func started(req *actionv1.ExecuteRequest, at time.Time) *actionv1.CallRecord {
	return &actionv1.CallRecord{RunId: req.GetRunId(), CallId: req.GetCallId(), ToolName: req.GetToolName(),
		State: actionv1.CallState_CALL_STATE_STARTED, StartedAt: timestamppb.New(at)}
}

// record returns the ledger's record of req's call.
func record(t *testing.T, l action.Ledger, req *actionv1.ExecuteRequest) *actionv1.CallRecord {
	t.Helper()
	rec, _, err := l.Get(t.Context(), req.GetRunId(), req.GetCallId())
	if err != nil {
		t.Fatalf("record of %s: %v", req.GetCallId(), err)
	}
	return rec
}

// watching reports whether someone watches a key of the ledger's bucket: a replica waiting
// for a call that runs elsewhere.
func watching(t *testing.T, js jetstream.JetStream) bool {
	t.Helper()
	s, err := js.Stream(t.Context(), "KV_"+action.CallBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Consumers > 0
}

func TestReplicasShareTheLedger(t *testing.T) {
	srv := natsServer(t)
	counter := newFakeTool("counter", returns("counted"))
	failing := newFakeTool("failing", func(context.Context, action.Call) (string, error) { return "", errors.New("disk on fire") })
	tools := []action.Tool{counter, failing}
	a := replica(t, srv, action.Options{Tools: tools})
	b := replica(t, srv, action.Options{Tools: tools})

	for _, tool := range []*fakeTool{counter, failing} {
		req := request(t, tool.def.GetName(), nil)
		first, err := a.Execute(t.Context(), req)
		if err != nil || first.GetCached() {
			t.Fatalf("%s on replica A: %v %v", req.GetToolName(), first, err)
		}
		again, err := b.Execute(t.Context(), req)
		if err != nil || !again.GetCached() {
			t.Fatalf("%s on replica B: %v %v, want A's result, cached", req.GetToolName(), again, err)
		}
		again.Cached = false
		if !proto.Equal(again, first) {
			t.Errorf("%s: replica B answered %v, replica A %v", req.GetToolName(), again, first)
		}
		if n := tool.calls.Load(); n != 1 {
			t.Errorf("%s ran %d times, want 1", req.GetToolName(), n)
		}

		reused := proto.CloneOf(req)
		reused.ToolName = "calculator"
		_, err = b.Execute(t.Context(), reused)
		grpctest.WantStageError(t, err, codes.FailedPrecondition, typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION, "call id reused for another tool")
	}
}

// TestLargeResultIsRecordedWhole (issue 11.6): a result over the NATS max payload (1 MB) is
// recorded done, so another instance answers a second Execute of the call with the whole
// result instead of reporting it interrupted.
func TestLargeResultIsRecordedWhole(t *testing.T) {
	srv := natsServer(t)
	large := strings.Repeat("0123456789", 300_000) // 3 MB
	dump := newFakeTool("dump", returns(large))
	a := replica(t, srv, action.Options{Tools: []action.Tool{dump}})
	b := replica(t, srv, action.Options{Tools: []action.Tool{dump}})

	req := request(t, "dump", nil)
	first, err := a.Execute(t.Context(), req)
	if err != nil || first.GetResult() != large {
		t.Fatalf("Execute on instance A: %d bytes, %v", len(first.GetResult()), err)
	}
	again, err := b.Execute(t.Context(), req)
	if err != nil || !again.GetCached() || again.GetResult() != large {
		t.Fatalf("Execute on instance B: cached %v, %d bytes (%.60q), %v; want A's whole result, cached",
			again.GetCached(), len(again.GetResult()), again.GetResult(), err)
	}
	if n := dump.calls.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}

func TestReplicasFromConfiguration(t *testing.T) {
	cfg := config.Default()
	cfg.NATS.URL = natsServer(t).ClientURL()
	counter := newFakeTool("counter", returns("counted"))
	a, b := serveConfig(t, cfg, counter), serveConfig(t, cfg, counter)

	req := request(t, "counter", nil)
	for i, client := range []actionv1.ActionServiceClient{a, b, a} {
		resp, err := client.Execute(t.Context(), req)
		if err != nil || resp.GetResult() != "counted" || resp.GetCached() != (i > 0) {
			t.Fatalf("call %d: %v %v", i, resp, err)
		}
	}
	if n := counter.calls.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
}

func TestCallOfADeadReplica(t *testing.T) {
	srv := natsServer(t)
	dead := kvLedger(t, srv, action.KVLedgerOptions{}) // the ledger of a replica that died
	counter := newFakeTool("counter", returns("counted"))
	lookup := newFakeTool("lookup", returns("found"))
	client := replica(t, srv, action.Options{Tools: []action.Tool{counter, lookup}, Idempotent: []string{"lookup"}})

	t.Run("a tool that is not idempotent is not run again", func(t *testing.T) {
		req := request(t, "counter", nil)
		if _, err := dead.Put(t.Context(), started(req, time.Now().Add(-time.Hour)), 0); err != nil {
			t.Fatal(err)
		}
		for i, cached := range []bool{false, true} {
			resp, err := client.Execute(t.Context(), req)
			if err != nil {
				t.Fatalf("Execute %d: %v", i, err)
			}
			if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_ERROR || resp.GetErrorCode() != typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR ||
				resp.GetError() != interrupted || !resp.GetInterrupted() || resp.GetCached() != cached || resp.GetResult() != "" {
				t.Fatalf("Execute %d: %v, want interrupted (cached %v)", i, resp, cached)
			}
		}
		if n := counter.calls.Load(); n != 0 {
			t.Fatalf("the tool ran %d times, want 0", n)
		}
		if rec := record(t, dead, req); rec.GetState() != actionv1.CallState_CALL_STATE_DONE || !rec.GetResponse().GetInterrupted() {
			t.Errorf("record %v, want done as interrupted", rec)
		}
	})

	t.Run("an idempotent tool runs again", func(t *testing.T) {
		req := request(t, "lookup", nil)
		if _, err := dead.Put(t.Context(), started(req, time.Now().Add(-time.Hour)), 0); err != nil {
			t.Fatal(err)
		}
		resp, err := client.Execute(t.Context(), req)
		if err != nil || resp.GetResult() != "found" || resp.GetCached() || resp.GetInterrupted() {
			t.Fatalf("Execute: %v %v, want the tool's fresh result", resp, err)
		}
		if n := lookup.calls.Load(); n != 1 {
			t.Fatalf("the tool ran %d times, want 1", n)
		}
		if rec := record(t, dead, req); rec.GetState() != actionv1.CallState_CALL_STATE_DONE || rec.GetResponse().GetResult() != "found" {
			t.Errorf("record %v, want done with the result", rec)
		}
	})
}

func TestCallRunningOnAnotherReplica(t *testing.T) {
	srv := natsServer(t)
	other := kvLedger(t, srv, action.KVLedgerOptions{}) // the ledger of a replica running the call
	js, err := jetstream.New(connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	counter := newFakeTool("counter", returns("counted"))
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	client := replica(t, srv, action.Options{Tools: []action.Tool{counter}, Now: func() time.Time { return now }})

	t.Run("is awaited", func(t *testing.T) {
		req := request(t, "counter", nil)
		req.TimeoutMs = time.Hour.Milliseconds()
		rev, err := other.Put(t.Context(), started(req, now), 0)
		if err != nil {
			t.Fatal(err)
		}
		answer := executeAsync(t.Context(), client, req)
		mcptest.Poll(t, 10*time.Second, "the replica to wait for the call's record", func() bool { return watching(t, js) })
		done := started(req, now)
		done.State = actionv1.CallState_CALL_STATE_DONE
		done.Response = &actionv1.ExecuteResponse{Status: typev1.ToolStatus_TOOL_STATUS_SUCCESS, Result: "counted elsewhere"}
		if _, err := other.Put(t.Context(), done, rev); err != nil {
			t.Fatal(err)
		}
		r := <-answer
		if r.err != nil || r.resp.GetResult() != "counted elsewhere" || !r.resp.GetCached() {
			t.Fatalf("Execute: %v %v, want the other replica's result, cached", r.resp, r.err)
		}
	})

	t.Run("is interrupted once its timeout has passed", func(t *testing.T) {
		req := request(t, "counter", nil)
		req.TimeoutMs = 1000
		// Started 1 s and 2 s of grace ago, less 50 ms: the replica waits 50 ms for it.
		if _, err := other.Put(t.Context(), started(req, now.Add(-3*time.Second+50*time.Millisecond)), 0); err != nil {
			t.Fatal(err)
		}
		resp, err := client.Execute(t.Context(), req)
		if err != nil || !resp.GetInterrupted() || resp.GetError() != interrupted {
			t.Fatalf("Execute: %v %v, want interrupted", resp, err)
		}
	})
	if n := counter.calls.Load(); n != 0 {
		t.Errorf("the tool ran %d times, want 0", n)
	}
}

// TestCallOfADeadInstance: a started call whose instance's heartbeat is gone will never
// finish, so it is settled at once, long before its deadline; while the instance lives it is
// awaited.
func TestCallOfADeadInstance(t *testing.T) {
	srv := natsServer(t)
	other := kvLedger(t, srv, action.KVLedgerOptions{}) // the ledger of the replica running the call
	instance, err := other.Instance(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	counter := newFakeTool("counter", returns("counted"))
	client := replica(t, srv, action.Options{Tools: []action.Tool{counter}})
	req := request(t, "counter", nil)
	req.TimeoutMs = time.Hour.Milliseconds()
	rec := started(req, time.Now())
	rec.Instance, rec.Deadline = instance, timestamppb.New(time.Now().Add(time.Hour))
	if _, err := other.Put(t.Context(), rec, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := client.Execute(ctx, req); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Execute while the instance lives = %v, want it to wait (DEADLINE_EXCEEDED here)", err)
	}
	if err := other.Close(); err != nil { // the instance dies: its heartbeat key goes
		t.Fatal(err)
	}
	resp, err := client.Execute(t.Context(), req)
	if err != nil || !resp.GetInterrupted() || resp.GetError() != interrupted {
		t.Fatalf("Execute after the instance died = %v %v, want interrupted", resp, err)
	}
	if n := counter.calls.Load(); n != 0 {
		t.Errorf("the tool ran %d times, want 0", n)
	}
}

func TestConcurrentReplicasRunACallOnce(t *testing.T) {
	const perReplica = 4
	srv := natsServer(t)
	js, err := jetstream.New(connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	g := newGate()
	counter := newFakeTool("counter", g.body)
	a := replica(t, srv, action.Options{Tools: []action.Tool{counter}})
	b := replica(t, srv, action.Options{Tools: []action.Tool{counter}})

	req := request(t, "counter", nil)
	var answers []chan result
	for range perReplica {
		answers = append(answers, executeAsync(t.Context(), a, req), executeAsync(t.Context(), b, req))
	}
	<-g.entered
	mcptest.Poll(t, 10*time.Second, "the other replica to wait for the call's record", func() bool { return watching(t, js) })
	close(g.release)

	uncached := 0
	for _, answer := range answers {
		r := <-answer
		if r.err != nil || r.resp.GetResult() != "done "+req.GetCallId() {
			t.Fatalf("answer: %v %v", r.resp, r.err)
		}
		if !r.resp.GetCached() {
			uncached++
		}
	}
	if n := counter.calls.Load(); n != 1 || uncached != 1 {
		t.Fatalf("the tool ran %d times, %d answers uncached; want 1 and 1", n, uncached)
	}
}

func TestLedgerUnavailable(t *testing.T) {
	counter := newFakeTool("counter", returns("counted"))
	unavailable := func(t *testing.T, client actionv1.ActionServiceClient) {
		t.Helper()
		_, err := client.Execute(t.Context(), request(t, "counter", nil))
		grpctest.WantStageError(t, err, codes.Unavailable, typev1.StageErrorCode_STAGE_ERROR_CODE_UNAVAILABLE,
			"the call ledger is unavailable, so the tool was not run")
		if n := counter.calls.Load(); n != 0 {
			t.Fatalf("the tool ran %d times, want 0", n)
		}
	}

	t.Run("NATS is down", func(t *testing.T) {
		srv := natsServer(t)
		ledger := kvLedger(t, srv, action.KVLedgerOptions{Timeout: 200 * time.Millisecond})
		client := serve(t, action.Options{Tools: []action.Tool{counter}, Ledger: ledger})
		srv.Shutdown()
		unavailable(t, client)
	})

	t.Run("the connection is closed", func(t *testing.T) {
		ledger, nc := kvLedgerConn(t, natsServer(t), action.KVLedgerOptions{})
		client := serve(t, action.Options{Tools: []action.Tool{counter}, Ledger: ledger})
		nc.Close()
		unavailable(t, client)
	})

	t.Run("a tool that ran is answered even when its result cannot be recorded", func(t *testing.T) {
		ledger, nc := kvLedgerConn(t, natsServer(t), action.KVLedgerOptions{})
		g := newGate()
		client := serve(t, action.Options{Tools: []action.Tool{newFakeTool("gated", g.body)}, Ledger: ledger})
		req := request(t, "gated", nil)
		answer := executeAsync(t.Context(), client, req)
		<-g.entered
		nc.Close()
		close(g.release)
		if r := <-answer; r.err != nil || r.resp.GetResult() != "done "+req.GetCallId() || r.resp.GetCached() {
			t.Fatalf("Execute: %v %v, want the tool's result", r.resp, r.err)
		}
	})
}

// TestAnIdempotentCallIsWrittenOnce: the call of an idempotent tool is written to the ledger
// once, done, and the call of any other tool twice, started and done. A repeated request for
// the idempotent call runs its tool again, harmlessly, and is answered from the record.
func TestAnIdempotentCallIsWrittenOnce(t *testing.T) {
	srv := natsServer(t)
	js, err := jetstream.New(connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	counter := newFakeTool("counter", returns("counted"))
	lookup := newFakeTool("lookup", returns("found"))
	client := replica(t, srv, action.Options{Tools: []action.Tool{counter, lookup}, Idempotent: []string{"lookup"}})
	writes := func() uint64 {
		st, err := js.Stream(t.Context(), "KV_"+action.CallBucket)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return 0 // the ledger makes its bucket with its first write
		}
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
	for _, tc := range []struct {
		tool, result string
		writes       uint64
	}{{"counter", "counted", 2}, {"lookup", "found", 1}} {
		req := request(t, tc.tool, nil)
		before := writes()
		resp, err := client.Execute(t.Context(), req)
		if err != nil || resp.GetResult() != tc.result || resp.GetCached() {
			t.Fatalf("Execute(%s): %v %v", tc.tool, resp, err)
		}
		if n := writes() - before; n != tc.writes {
			t.Errorf("the call of %s made %d writes to the ledger, want %d", tc.tool, n, tc.writes)
		}
		if rec := record(t, kvLedger(t, srv, action.KVLedgerOptions{}), req); rec.GetState() != actionv1.CallState_CALL_STATE_DONE ||
			rec.GetResponse().GetResult() != tc.result || rec.GetStartedAt() == nil {
			t.Errorf("record of %s: %v, want done with its result and start", tc.tool, rec)
		}
	}
	req := request(t, "lookup", nil)
	for i, cached := range []bool{false, true} {
		resp, err := client.Execute(t.Context(), req)
		if err != nil || resp.GetResult() != "found" || resp.GetCached() != cached {
			t.Fatalf("Execute %d of one idempotent call: %v %v, want cached %v", i, resp, err, cached)
		}
	}
	if n := lookup.calls.Load(); n != 3 {
		t.Errorf("the idempotent tool ran %d times, want 3 (once, then twice for one call)", n)
	}
}
