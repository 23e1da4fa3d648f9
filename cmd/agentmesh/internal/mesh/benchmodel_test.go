package mesh_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// The benchmarks' model process: this test binary re-executed (TestMain sees modelProcessEnv)
// serves the scripted model on a loopback port, so that what a benchmark measures of its own
// process is the mesh's (or LangGraph's) alone: over plain HTTP/1.1, as a local model server
// answers, and over HTTP/2 and TLS, as a hosted provider does. It also runs a NATS server
// with JetStream, for benchmarks whose mesh should not count the NATS server's memory, which
// a deployment runs apart (BenchmarkIdleRun). It prints, a line each, the plain model's base
// URL, the NATS server's URL, the TLS model's base URL and its certificate (base64 DER). For BenchmarkIdleRun it is also the runs' client, told what to do on its
// standard input, one command a line:
//
//	hold N ADDR H start N runs of holdRun against the public API at ADDR, each with H earlier
//	              messages, their first model request held; answers "holding" once all N
//	              are held
//	release       let the held requests go on; answers "released" once the N runs completed
//	              (a run that did not is an error, printed on standard error)

// modelProcessEnv, set, makes the test binary the benchmarks' model process (serveModel).
const modelProcessEnv = "AGENTMESH_BENCH_MODEL"

// vsLangGraph is the run BenchmarkVsLangGraph makes in both: 9 tool turns, then the answer.
const vsLangGraph = "bench vs langgraph"

// turnRuns are BenchmarkTurn's runs: a run of turns turns (turnRunName) after history earlier
// messages.
var turnRuns = []struct{ turns, history int }{{benchTurns, 0}, {50, 40}}

// turnRunName is the name (and message) of BenchmarkTurn's run of turns turns.
func turnRunName(turns int) string { return fmt.Sprintf("bench %d turns", turns) }

// The runs of BenchmarkCheckpoints and BenchmarkConcurrent: 9 tool turns, then the answer.
const (
	checkpointsRun = "bench checkpoints"
	concurrentRun  = "bench concurrent"
)

// warmup is how many runs each side of BenchmarkVsLangGraph makes before it measures.
const warmup = 20

// slowModel is the run BenchmarkInFlight makes: one answer that takes the model modelLatency.
const slowModel = "bench in flight"

// modelLatency is how long the model of BenchmarkInFlight takes to answer.
const modelLatency = time.Second

// holdRun is the run BenchmarkIdleRun makes: a calculator call, whose request the model holds
// until released, then the answer.
const holdRun = "bench idle"

// idleHistory is how many earlier messages the runs of BenchmarkIdleRun's history case carry
// (of about 300 bytes each, see earlier): a conversation of some 12 KiB, which the mesh may hold
// more than once while the model answers.
const idleHistory = 40

// The model process's commands and answers.
const (
	holdCommand    = "hold"
	holding        = "holding"
	releaseCommand = "release"
	released       = "released"
)

// benchScenarios are the runs the model process answers; holdRun's first request waits on
// the gate.
func benchScenarios(g *gate) []llmtest.Scenario {
	scenarios := []llmtest.Scenario{
		toolRun(vsLangGraph, benchTurns),
		toolRun(checkpointsRun, benchTurns),
		toolRun(concurrentRun, benchTurns),
		{Name: slowModel, Match: slowModel, Turns: []llmtest.Turn{{Content: "Slowly answered.", DelayMS: int(modelLatency.Milliseconds())}}},
		heldRun(g, holdRunNamed(0, false), 0, false),
		heldRun(g, holdRunNamed(idleHistory, false), idleHistory/2, false),
		heldRun(g, holdRunNamed(0, true), 0, true),
	}
	for _, r := range turnRuns {
		scenarios = append(scenarios, toolRunAfter(turnRunName(r.turns), r.turns, r.history/2))
	}
	return scenarios
}

// holdRunNamed is the name (and message) of the hold run whose requests carry history earlier
// messages, held before the model answers or, streaming, once it has begun: holdRun, or the
// history or the streaming case's.
func holdRunNamed(history int, streaming bool) string {
	switch {
	case history > 0:
		return holdRun + " history"
	case streaming:
		return holdRun + " streaming"
	}
	return holdRun
}

// heldRun is toolRun's two turns after answered ones, the first held at g until released:
// before the model answers, or, streaming, once the answer's first event is out (the client
// then has the response's headers and waits on its body).
func heldRun(g *gate, name string, answered int, streaming bool) llmtest.Scenario {
	hold := toolRunAfter(name, 2, answered)
	first := hold.Turns[answered]
	hold.Turns[answered] = llmtest.Turn{Respond: func(llmtest.Request, int) llmtest.Turn {
		if streaming {
			t := first
			t.Streaming = g.wait
			return t
		}
		g.wait()
		return first
	}}
	return hold
}

// gate holds model requests until opened; it counts those it holds.
type gate struct {
	mu     sync.Mutex
	open   chan struct{}
	held   int
	change chan struct{} // closed and replaced whenever held changes
}

func newGate() *gate { return &gate{open: make(chan struct{}), change: make(chan struct{})} }

// wait holds the calling request until the gate opens.
func (g *gate) wait() {
	g.mu.Lock()
	open := g.open
	g.held++
	close(g.change)
	g.change = make(chan struct{})
	g.mu.Unlock()
	<-open
}

// waitHeld returns once n requests are held.
func (g *gate) waitHeld(n int) {
	for {
		g.mu.Lock()
		held, change := g.held, g.change
		g.mu.Unlock()
		if held >= n {
			return
		}
		<-change
	}
}

// release lets the held requests go and closes the gate again for the next ones.
func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.open)
	g.open, g.held = make(chan struct{}), 0
}

// serveModel serves benchScenarios on a loopback port and starts a NATS server, prints their
// URLs, then follows the commands of its standard input until it closes; it returns the
// process's exit code.
func serveModel() int {
	if err := modelMain(); err != nil {
		fmt.Fprintln(os.Stderr, "model process:", err)
		return 1
	}
	return 0
}

func modelMain() error {
	g := newGate()
	s, err := llmtest.Start(benchScenarios(g)...)
	if err != nil {
		return err
	}
	defer s.Close()
	s.KeepRequests(false)
	secure, err := llmtest.StartTLS(benchScenarios(g)...)
	if err != nil {
		return err
	}
	defer secure.Close()
	secure.KeepRequests(false)
	dir, err := os.MkdirTemp("", "agentmesh-bench-nats-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	nats, err := events.StartEmbedded(events.EmbeddedOptions{StoreDir: dir, Port: -1})
	if err != nil {
		return err
	}
	defer nats.Shutdown()
	fmt.Println(s.URL())
	fmt.Println(nats.ClientURL())
	fmt.Println(secure.URL())
	fmt.Println(base64.StdEncoding.EncodeToString(secure.Certificate().Raw))
	var runs *holdWave
	for in := bufio.NewScanner(os.Stdin); in.Scan(); {
		switch f := strings.Fields(in.Text()); {
		case len(f) == 5 && f[0] == holdCommand:
			n, err := strconv.Atoi(f[1])
			if err != nil {
				return err
			}
			history, err := strconv.Atoi(f[3])
			if err != nil {
				return err
			}
			streaming, err := strconv.ParseBool(f[4])
			if err != nil {
				return err
			}
			if runs, err = startHoldWave(f[2], n, history, streaming); err != nil {
				return err
			}
			g.waitHeld(n)
			fmt.Println(holding)
		case len(f) == 1 && f[0] == releaseCommand && runs != nil:
			g.release()
			if err := runs.wait(); err != nil {
				return err
			}
			fmt.Println(released)
		default:
			return fmt.Errorf("unknown command %q", in.Text())
		}
	}
	if errs := slices.Concat(s.Errors(), secure.Errors()); len(errs) > 0 {
		return errors.New(strings.Join(errs, "\n"))
	}
	return nil
}

// holdWave is the runs of one hold command.
type holdWave struct {
	conn   *grpc.ClientConn
	wg     sync.WaitGroup
	failed atomic.Int64
	first  atomic.Value // the first failure's error
}

// startHoldWave starts n runs of holdRun against the public API at addr, each with history
// earlier messages (0 or idleHistory), held before the model answers or, streaming, once it
// has begun (holdRunNamed).
func startHoldWave(addr string, n, history int, streaming bool) (*holdWave, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	w := &holdWave{conn: conn}
	client := agentv1.NewAgentServiceClient(conn)
	name := holdRunNamed(history, streaming)
	req := toolRequest(name, 2, earlier(name, history))
	req.Overrides.StreamAnswers = proto.Bool(streaming)
	for range n {
		w.wg.Go(func() {
			res, err := client.Run(context.Background(), req)
			if err == nil && res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
				err = fmt.Errorf("run ended %v %s", res.GetOutcome(), res.GetExitReason())
			}
			if err != nil && w.failed.Add(1) == 1 {
				w.first.Store(err)
			}
		})
	}
	return w, nil
}

// wait waits for the wave's runs and closes its connection; an error when any failed.
func (w *holdWave) wait() error {
	w.wg.Wait()
	_ = w.conn.Close()
	if n := w.failed.Load(); n > 0 {
		return fmt.Errorf("%d runs failed, the first: %v", n, w.first.Load())
	}
	return nil
}

// modelProc is a running model process.
type modelProc struct {
	url    string       // the plain model's base URL
	nats   string       // the NATS server's URL
	tlsURL string       // the TLS model's base URL
	tls    *http.Client // a client of the TLS model, over HTTP/2
	stdin  io.Writer
	stdout *bufio.Reader
}

// modelProcess starts the model process; it stops when b ends.
func modelProcess(b testing.TB) *modelProc {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), modelProcessEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	p := &modelProc{stdin: stdin, stdout: bufio.NewReader(stdout)}
	p.url, p.nats, p.tlsURL = p.line(b), p.line(b), p.line(b)
	der, err := base64.StdEncoding.DecodeString(p.line(b))
	if err != nil {
		b.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		b.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 256}
	b.Cleanup(tr.CloseIdleConnections)
	p.tls = &http.Client{Transport: tr}
	return p
}

// ask sends the model process a command and fails b unless it answers want.
func (p *modelProc) ask(b testing.TB, command, want string) {
	b.Helper()
	if _, err := fmt.Fprintln(p.stdin, command); err != nil {
		b.Fatalf("model process: %v", err)
	}
	if got := p.line(b); got != want {
		b.Fatalf("model process answered %q to %q, want %q", got, command, want)
	}
}

// line reads the next line the model process prints.
func (p *modelProc) line(b testing.TB) string {
	b.Helper()
	line, err := p.stdout.ReadString('\n')
	if err != nil {
		b.Fatalf("model process: %v (see its standard error)", err)
	}
	return strings.TrimSpace(line)
}
