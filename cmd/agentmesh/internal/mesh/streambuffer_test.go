package mesh_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// TestAStreamRunClientThatStopsReading: a StreamRun's events wait in the orchestrator while
// its client reads more slowly than the run emits them, and a client that stopped reading
// had every event of its run held for as long as it stayed connected. Past
// grpc.stream_buffer_bytes, the stream ends RESOURCE_EXHAUSTED naming the seq of the last
// event sent, and the client follows the run on with WatchRun from that seq: every event,
// each once. The client's gRPC windows are fixed at 64 KiB, so that gRPC takes no more of the
// run's events than that before the orchestrator has to hold them, but for one message
// (gRPC takes a message whole while its stream has any room) and the one its send waits
// with: the run has two turns of long text, five events of 200 kB (two deltas, two responses
// and the result), so that at least two of them meet the buffer whatever the timing. With one
// turn, three such events, the buffer held the last alone when the sender had taken the
// first two, and the test failed under load.
func TestAStreamRunClientThatStopsReading(t *testing.T) {
	cfg := config.Default()
	cfg.GRPC.StreamBufferBytes = 64 << 10
	const message = "Write at length."
	long := strings.TrimSpace(strings.Repeat(strings.Repeat("x", 999)+" ", 200)) // 200 kB
	first := calcTurn("c1", "6*7")
	first.Content = long
	h := start(t, cfg, llmtest.Scenario{Name: "long", Match: message,
		Turns: []llmtest.Turn{first, text(long)}})
	conn, err := grpc.NewClient(h.mesh.OrchestratorAddrs()[0],
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	stream, err := agentv1.NewAgentServiceClient(conn).StreamRun(t.Context(),
		&agentv1.RunRequest{Message: message, RunId: "slow-reader"})
	if err != nil {
		t.Fatal(err)
	}
	// The client reads nothing until the run has finished.
	finished := eventually(t, time.Minute, func() bool {
		_, err := h.client.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: "slow-reader"})
		return err == nil
	})
	if !finished {
		t.Fatal("the run did not finish within a minute")
	}
	var seqs []uint64
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				t.Fatalf("the stream held all %d events of the run for its client", len(seqs))
			}
			last := seqs[len(seqs)-1]
			if status.Code(err) != codes.ResourceExhausted ||
				!strings.Contains(err.Error(), fmt.Sprintf("WatchRun from_seq %d", last)) {
				t.Fatalf("the stream ended %v; want RESOURCE_EXHAUSTED naming seq %d", err, last)
			}
			break
		}
		seqs = append(seqs, ev.GetSeq())
	}
	watch, err := h.client.WatchRun(t.Context(),
		&agentv1.WatchRunRequest{RunId: "slow-reader", FromSeq: seqs[len(seqs)-1]})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := watch.Recv()
		if err != nil {
			t.Fatalf("WatchRun ended %v before run_finished", err)
		}
		seqs = append(seqs, ev.GetSeq())
		if ev.GetRunFinished() != nil {
			break
		}
	}
	for i, seq := range seqs {
		if seq != uint64(i+1) {
			t.Fatalf("the events streamed, then watched: seqs %v", seqs)
		}
	}
}
