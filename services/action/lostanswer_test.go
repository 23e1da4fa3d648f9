package action_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/logtest"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/services/action"
)

// TestAStartedRecordWhoseAnswerWasLost: the ledger stored a call's started record, but the
// answer to the write was lost with the connection (it dropped, and the client reconnected).
// The call was refused as if the ledger were down ("the tool was not run"), and its retry found
// the started record of a live instance: it waited out the call's whole timeout, then told the
// model the call was "interrupted by a restart; it may or may not have run", though the tool
// never ran and nothing restarted. The write is now read back: the ledger holds the record,
// so the call goes on and its tool runs, once.
func TestAStartedRecordWhoseAnswerWasLost(t *testing.T) {
	srv := natsServer(t)
	proxy := natstest.NewCutter(t, srv.ClientURL()[len("nats://"):])
	nc, err := events.Connect(proxy.URL(), "agentmesh-action-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ledger, err := action.NewKVLedger(nc, action.KVLedgerOptions{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ledger.Close() })
	counter := newFakeTool("counter", returns("counted"))
	client := serve(t, action.Options{Tools: []action.Tool{counter}, Ledger: ledger})

	req := request(t, "counter", nil)
	req.TimeoutMs = 2000
	// The first request makes the instance known, so the cut lands on the call's record.
	if _, err := client.Execute(t.Context(), request(t, "counter", nil)); err != nil {
		t.Fatal(err)
	}
	proxy.Arm("$KV." + action.CallBucket + ".")
	resp, err := client.Execute(t.Context(), req)
	<-proxy.Cut()
	if err != nil {
		// The caller retries a call the ledger refused, as the orchestrator does.
		if resp, err = client.Execute(t.Context(), req); err != nil {
			t.Fatalf("Execute, again after the ledger refused it: %v", err)
		}
	}
	if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_SUCCESS || resp.GetResult() != "counted" {
		t.Errorf("Execute = %s %q (error %q), want the tool's result",
			resp.GetStatus(), resp.GetResult(), resp.GetError())
	}
	if n := counter.calls.Load(); n != 2 {
		t.Errorf("the tool ran %d times for the two calls, want 2", n)
	}
}

// TestADoneRecordWhoseAnswerWasLost: the ledger stored a call's done record, but the answer to
// the write was lost with the connection. The call was answered, and logged as a tool that
// "ran but the call ledger did not record its result", which sends an operator looking for a
// call the ledger holds. The write is now read back first, for a call recorded as started
// before it ran and for an idempotent tool's, recorded once, done.
func TestADoneRecordWhoseAnswerWasLost(t *testing.T) {
	for _, idempotent := range []bool{false, true} {
		t.Run(fmt.Sprintf("idempotent=%t", idempotent), func(t *testing.T) {
			srv := natsServer(t)
			proxy := natstest.NewCutter(t, srv.ClientURL()[len("nats://"):])
			nc, err := events.Connect(proxy.URL(), "agentmesh-action-test")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			ledger, err := action.NewKVLedger(nc, action.KVLedgerOptions{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ledger.Close() })
			body := func(_ context.Context, call action.Call) (string, error) {
				enc := base64.RawURLEncoding.EncodeToString
				// Cuts at the call's done record.
				proxy.Arm("$KV." + action.CallBucket + "." + enc([]byte(call.RunID)) + "." +
					enc([]byte(call.CallID)))
				return "counted", nil
			}
			counter := newFakeTool("counter", body)
			counter.def.Idempotent = idempotent
			logs := &logtest.Buffer{}
			client := serve(t, action.Options{Tools: []action.Tool{counter}, Ledger: ledger,
				Logger: slog.New(slog.NewJSONHandler(logs, nil))})

			req := request(t, "counter", nil)
			resp, err := client.Execute(t.Context(), req)
			<-proxy.Cut()
			if err != nil || resp.GetResult() != "counted" {
				t.Fatalf("Execute = %v, %v; want the tool's result", resp, err)
			}
			var rec *actionv1.CallRecord
			for deadline := time.Now().Add(10 * time.Second); ; {
				rec, _, err = ledger.Get(t.Context(), req.GetRunId(), req.GetCallId())
				if err == nil {
					break // read once the connection is back
				}
				if time.Now().After(deadline) {
					t.Fatalf("reading the call's record: %v", err)
				}
			}
			// The cutter cuts after the read that holds the write's header; when its payload
			// came in a later read, NATS stored nothing, and the log is right to say so.
			recorded := rec.GetState() == actionv1.CallState_CALL_STATE_DONE
			if logged := strings.Contains(logs.String(), "did not record"); logged == recorded {
				t.Errorf("the ledger holds %v; logged as unrecorded: %t\n%s", rec, logged, logs)
			}
		})
	}
}
