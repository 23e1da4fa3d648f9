package main

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestRunInterruptedBeforeItsFirstEvent: Ctrl-C while `agentmesh run` has sent its run but
// not yet received any of its events (the mesh started the run; its first event is still on
// the way, e.g. while NATS is slow to take it) cancels the run too. The CLI knew no run id to
// cancel, so it exited "context canceled" and the run went on unseen. It now chooses the run's
// id itself (RunRequest.run_id) and cancels that. A relay in front of the orchestrator holds
// the run's events back from the CLI.
func TestRunInterruptedBeforeItsFirstEvent(t *testing.T) {
	isolate(t)
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	llm := llmtest.New(t, llmtest.Scenario{Name: "slow", Match: "take your time", Turns: []llmtest.Turn{{Content: "Never sent.", Hold: hold}}})
	cfg := scriptedConfig(llm)
	upstream := agentv1.NewAgentServiceClient(dialService(t, startMesh(t, cfg).Addr("orchestrator")))
	relay := &holdingRelay{up: upstream, started: make(chan string, 1)}
	addr := serveRelay(t, relay)

	var runID string
	got, stdout, errOut := interruptRun(t, []string{"run", "--addr", addr, "take your time"}, "the run never asked the model", func() bool {
		if runID == "" {
			select {
			case runID = <-relay.started:
			default:
			}
		}
		return runID != "" && len(llm.Requests()) > 0
	})
	if got != 1 || !strings.Contains(errOut, "cancelling run "+runID) || !strings.Contains(errOut, "■ INTERRUPTED") {
		t.Errorf("interrupted before the first event: exit %d, want 1, the run %s cancelled and its end\nstdout: %s\nstderr: %s", got, runID, stdout, errOut)
	}
	awaitInterrupted(t, upstream, runID)
}

// holdingRelay is an AgentService in front of an orchestrator that starts StreamRun's runs
// there but sends the caller none of their events (it tells started the run's id); every other
// call it relays.
type holdingRelay struct {
	agentv1.UnimplementedAgentServiceServer
	up      agentv1.AgentServiceClient
	started chan string
	once    sync.Once
}

func (h *holdingRelay) StreamRun(req *agentv1.RunRequest, stream grpc.ServerStreamingServer[eventv1.RunEvent]) error {
	up, err := h.up.StreamRun(stream.Context(), req)
	if err != nil {
		return err
	}
	first, err := up.Recv()
	if err != nil {
		return err
	}
	h.once.Do(func() { h.started <- first.GetRunId() })
	<-stream.Context().Done()
	return stream.Context().Err()
}

func (h *holdingRelay) CancelRun(ctx context.Context, req *agentv1.CancelRunRequest) (*agentv1.CancelRunResponse, error) {
	return h.up.CancelRun(ctx, req)
}

func (h *holdingRelay) GetRun(ctx context.Context, req *agentv1.GetRunRequest) (*typev1.RunResult, error) {
	return h.up.GetRun(ctx, req)
}

func (h *holdingRelay) WatchRun(req *agentv1.WatchRunRequest, stream grpc.ServerStreamingServer[eventv1.RunEvent]) error {
	up, err := h.up.WatchRun(stream.Context(), req)
	if err != nil {
		return err
	}
	return relayAll(up, stream)
}

// serveRelay serves relay on a local port until the test ends and returns its address.
func serveRelay(t *testing.T, relay agentv1.AgentServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	agentv1.RegisterAgentServiceServer(srv, relay)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// TestRunInterruptedBeforeItStarted: an `agentmesh run` interrupted before its request reached
// the mesh finds no run to cancel, says so and exits 1, not "context canceled".
func TestRunInterruptedBeforeItStarted(t *testing.T) {
	isolate(t)
	addr := startMesh(t, config.Default()).Addr("orchestrator")
	ctx, interrupt := context.WithCancel(t.Context())
	interrupt()
	var stdout, stderr bytes.Buffer
	got := run(ctx, []string{"run", "--addr", addr, "What is 6 times 7?"}, &stdout, &stderr)
	if errOut := stderr.String(); got != 1 || !strings.Contains(errOut, "interrupted before run ") || strings.Contains(errOut, "context canceled") {
		t.Errorf("interrupted before the run started: exit %d, want 1 and a run that never started\nstdout: %s\nstderr: %s", got, stdout.String(), errOut)
	}
}

// TestRunAndWatchSayHowToFollowARunAfterADisconnect: when the connection to the orchestrator
// breaks while `agentmesh run` or `agentmesh watch` follows a run, the run goes on in the mesh,
// and the CLI says so and names the watch that follows it on from the last event it showed.
// It said only that it could not reach the orchestrator, and a user took the run for lost. A
// relay in front of the orchestrator breaks each stream after its first event, and refuses the
// CLI's re-attachments (reattachLimit, shortened).
func TestRunAndWatchSayHowToFollowARunAfterADisconnect(t *testing.T) {
	isolate(t)
	limit := reattachLimit
	reattachLimit = time.Second
	t.Cleanup(func() { reattachLimit = limit })
	hold, release := heldTurn(t)
	llm := llmtest.New(t, llmtest.Scenario{Name: "slow", Match: "take your time", Turns: []llmtest.Turn{{Content: "Done at last.", Hold: hold}}})
	cfg := scriptedConfig(llm)
	meshAddr := startMesh(t, cfg).Addr("orchestrator")
	addr := serveRelay(t, &breakingRelay{up: agentv1.NewAgentServiceClient(dialService(t, meshAddr))})

	stdout, stderr := runCLI(t, 3, "run", "--addr", addr, "take your time")
	m := regexp.MustCompile(`\nrun (\S+) is not lost: follow it with: agentmesh watch (\S+) --from 1\n`).FindStringSubmatch(stderr)
	if m == nil || m[1] != m[2] {
		t.Fatalf("run cut off after its first event does not say how to follow the run\nstdout: %s\nstderr: %s", stdout, stderr)
	}
	runID := m[1]
	stdout, stderr = runCLI(t, 3, "watch", "--addr", addr, runID)
	if want := "\nrun " + runID + " is not lost: follow it with: agentmesh watch " + runID + " --from 1\n"; !strings.Contains(stderr, want) {
		t.Errorf("watch cut off after its first event does not say %q\nstdout: %s\nstderr: %s", want, stdout, stderr)
	}
	release()
	if _, stderr := runCLI(t, 0, "watch", "--addr", meshAddr, "--from", "1", runID); strings.Contains(stderr, "▶ run") || !strings.Contains(stderr, "■ COMPLETED") {
		t.Errorf("the watch the CLI named does not follow the run on to its end:\n%s", stderr)
	}
}

// breakingRelay is an AgentService in front of an orchestrator that relays the first event of
// each StreamRun and WatchRun and then fails the stream UNAVAILABLE, as a broken connection does;
// a WatchRun after an event (a re-attachment) fails UNAVAILABLE at once: the connection stays
// broken.
type breakingRelay struct {
	agentv1.UnimplementedAgentServiceServer
	up agentv1.AgentServiceClient
}

func (b *breakingRelay) StreamRun(req *agentv1.RunRequest, stream grpc.ServerStreamingServer[eventv1.RunEvent]) error {
	up, err := b.up.StreamRun(stream.Context(), req)
	if err != nil {
		return err
	}
	return relayFirst(up, stream)
}

func (b *breakingRelay) WatchRun(req *agentv1.WatchRunRequest, stream grpc.ServerStreamingServer[eventv1.RunEvent]) error {
	if req.GetFromSeq() > 0 {
		return status.Error(codes.Unavailable, "connection refused")
	}
	up, err := b.up.WatchRun(stream.Context(), req)
	if err != nil {
		return err
	}
	return relayFirst(up, stream)
}

// relayAll sends every event of up on stream, until either fails.
func relayAll(up grpc.ServerStreamingClient[eventv1.RunEvent],
	stream grpc.ServerStreamingServer[eventv1.RunEvent],
) error {
	for {
		ev, err := up.Recv()
		if err != nil {
			return err
		}
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
}

// relayFirst sends the first event of up on stream, then fails UNAVAILABLE.
func relayFirst(up grpc.ServerStreamingClient[eventv1.RunEvent], stream grpc.ServerStreamingServer[eventv1.RunEvent]) error {
	ev, err := up.Recv()
	if err != nil {
		return err
	}
	if err := stream.Send(ev); err != nil {
		return err
	}
	return status.Error(codes.Unavailable, "connection reset by peer")
}

// TestRunInterruptedWhileItReattaches: Ctrl-C while `agentmesh run` tries to follow its run on
// after its stream broke still cancels the run, and shows how it ended. A relay in front of the
// orchestrator breaks the run's stream after its first event and refuses every WatchRun until
// the run is cancelled.
func TestRunInterruptedWhileItReattaches(t *testing.T) {
	isolate(t)
	hold, _ := heldTurn(t)
	llm := llmtest.New(t, llmtest.Scenario{Name: "slow", Match: "take your time", Turns: []llmtest.Turn{{Content: "Never sent.", Hold: hold}}})
	cfg := scriptedConfig(llm)
	relay := &refusingRelay{breakingRelay: breakingRelay{up: agentv1.NewAgentServiceClient(dialService(t, startMesh(t, cfg).Addr("orchestrator")))}}
	addr := serveRelay(t, relay)

	got, stdout, errOut := interruptRun(t, []string{"run", "--addr", addr, "take your time"}, "the CLI never tried to follow its run on",
		func() bool { return relay.refused.Load() > 1 })
	if got != 1 || !strings.Contains(errOut, "cancelling run ") || !strings.Contains(errOut, "■ INTERRUPTED") {
		t.Errorf("interrupted while re-attaching: exit %d, want 1 and the run cancelled\nstdout: %s\nstderr: %s", got, stdout, errOut)
	}
}

// refusingRelay is a breakingRelay that refuses every WatchRun UNAVAILABLE (counted in refused)
// until CancelRun went through it; it then relays them.
type refusingRelay struct {
	breakingRelay
	cancelled atomic.Bool
	refused   atomic.Int32
}

func (r *refusingRelay) CancelRun(ctx context.Context, req *agentv1.CancelRunRequest) (*agentv1.CancelRunResponse, error) {
	r.cancelled.Store(true)
	return r.up.CancelRun(ctx, req)
}

func (r *refusingRelay) WatchRun(req *agentv1.WatchRunRequest, stream grpc.ServerStreamingServer[eventv1.RunEvent]) error {
	if !r.cancelled.Load() {
		r.refused.Add(1)
		return status.Error(codes.Unavailable, "connection refused")
	}
	return (&holdingRelay{up: r.up}).WatchRun(req, stream)
}

// interruptRun runs the CLI with args until ready holds (polled; what says why the test fails
// when it never does), then interrupts it as Ctrl-C does (main cancels its context), and
// returns its exit code and output.
func interruptRun(t *testing.T, args []string, what string, ready func() bool) (code int, stdout, stderr string) {
	t.Helper()
	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, &out, &errOut) }()
	if !poll(t, runTimeout, ready) {
		t.Fatal(what)
	}
	interrupt()
	select {
	case code = <-done:
	case <-time.After(runTimeout):
		t.Fatalf("%s did not return after the interrupt", args[0])
	}
	return code, out.String(), errOut.String()
}

// awaitInterrupted waits until the run runID ended INTERRUPTED, as the CLI's interrupt must end
// it, and fails the test if it goes on.
func awaitInterrupted(t *testing.T, client agentv1.AgentServiceClient, runID string) {
	t.Helper()
	var (
		res *typev1.RunResult
		err error
	)
	if !poll(t, runTimeout, func() bool {
		res, err = client.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: runID})
		return err == nil && res.GetOutcome() == typev1.Outcome_OUTCOME_INTERRUPTED
	}) {
		t.Fatalf("the run goes on after the CLI was interrupted: %v %v", res.GetOutcome(), err)
	}
}

// TestRunInterruptedAsItEnded: an `agentmesh run` interrupted after its run's events began,
// whose cancellation finds the run no more (NOT_FOUND: the run ended by itself meanwhile, and
// its result is no longer kept where CancelRun looks), follows the run's events to its end and
// exits with the run's own exit code, as for a run that ended before the cancellation reached
// it. It exited 4, an invalid argument, and said the run might still be running. A relay in
// front of the orchestrator lets the run end when CancelRun reaches it, then answers NOT_FOUND.
func TestRunInterruptedAsItEnded(t *testing.T) {
	isolate(t)
	hold, release := heldTurn(t)
	llm := llmtest.New(t, llmtest.Scenario{Name: "slow", Match: "take your time",
		Turns: []llmtest.Turn{{Content: "Done at last.", Hold: hold}}})
	cfg := scriptedConfig(llm)
	meshAddr := startMesh(t, cfg).Addr("orchestrator")
	upstream := agentv1.NewAgentServiceClient(dialService(t, meshAddr))
	addr := serveRelay(t, &endingRelay{holdingRelay: holdingRelay{up: upstream}, release: release})

	got, stdout, errOut := interruptRun(t, []string{"run", "--addr", addr, "take your time"},
		"the run never asked the model", func() bool { return len(llm.Requests()) > 0 })
	if got != 0 || !strings.Contains(errOut, "■ COMPLETED") ||
		!strings.Contains(stdout, "Done at last.") {
		t.Errorf("interrupted as the run ended: exit %d, want 0 and the run's end\n"+
			"stdout: %s\nstderr: %s", got, stdout, errOut)
	}
}

// endingRelay relays an orchestrator's StreamRun whole; CancelRun lets the run end (release),
// waits for its end, and answers NOT_FOUND. Its other calls are holdingRelay's.
type endingRelay struct {
	holdingRelay
	release func()
}

func (e *endingRelay) StreamRun(req *agentv1.RunRequest,
	stream grpc.ServerStreamingServer[eventv1.RunEvent],
) error {
	up, err := e.up.StreamRun(stream.Context(), req)
	if err != nil {
		return err
	}
	return relayAll(up, stream)
}

func (e *endingRelay) CancelRun(ctx context.Context, req *agentv1.CancelRunRequest,
) (*agentv1.CancelRunResponse, error) {
	e.release()
	for {
		res, err := e.up.GetRun(ctx, &agentv1.GetRunRequest{RunId: req.GetRunId()})
		if err == nil && res.GetOutcome() != typev1.Outcome_OUTCOME_UNSPECIFIED {
			return nil, status.Errorf(codes.NotFound, "run %q not found", req.GetRunId())
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
