package action_test

import (
	"testing"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/events"
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
