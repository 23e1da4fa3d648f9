package mesh_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"github.com/agentmesh/agentmesh/services/generation"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// The benchmarks of issue 15 (`make bench` runs them and compares their configurations with
// benchstat). Each runs the whole mesh in this process, every service on its own loopback
// gRPC port, against the scripted model over real HTTP, which answers at once: what they
// measure is the mesh's own cost per turn. A run of N turns is N-1 turns that each call the
// calculator once, then the answer. Besides ns/op they report ns/turn, B/turn and
// allocs/turn (the whole process: every service, the NATS server and the scripted model).

// benchTurns is the run of the per-turn benchmarks: 9 tool turns and the answer.
const benchTurns = 10

// benchOptions configure a benchmark's mesh.
type benchOptions struct {
	tracing     bool         // an SDK tracer provider that samples every span, exported in batches to nowhere; without, the provider of a deployment that exports none (telemetry.NewForwarder)
	checkpoints bool         // durability.checkpoints
	model       string       // the target's model; "" is benchModel
	nats        string       // the NATS server's URL; "" embeds one in the mesh
	httpClient  *http.Client // the model's client; nil is the generation service's own
	inProcess   bool         // the stages served in process (mesh.Options.InProcess): the floor of the design
	tools       int          // REST tools offered besides the calculator (offeredTool)
}

// offeredTools is how many tools BenchmarkTurn's /tools= case offers besides the calculator:
// as many as a few MCP servers give an agent.
const offeredTools = 30

// benchModel is the model of the benchmarks' target: a name without a known tokenizer, so
// tokens are estimated. The scripted model answers any name.
const benchModel = "gpt-bench"

// tiktokenModel is a model name that selects a BPE tokenizer (o200k_base): every count the
// mesh makes is then an exact BPE count.
const tiktokenModel = "gpt-4o"

// benchMesh is a mesh for benchmarks and its public API.
type benchMesh struct {
	addr   string // the public API's
	client agentv1.AgentServiceClient
	spans  *trace.TracerProvider // with tracing; nil without
	store  jetstream.JetStream   // the runs' store, for awaitRetired; nil without checkpoints
}

// toolRun is the scripted model's side of a run of n turns: n-1 calculator calls, then the
// answer. Its message is its name.
func toolRun(name string, n int) llmtest.Scenario { return toolRunAfter(name, n, 0) }

// toolRunAfter is toolRun for a run whose history holds answered assistant messages (the
// scripted model counts a conversation's assistant messages to find its turn): its turns come
// after as many that are never asked for.
func toolRunAfter(name string, n, answered int) llmtest.Scenario {
	turns := make([]llmtest.Turn, n, answered+n)
	for i := range n - 1 {
		turns[i] = llmtest.Turn{ToolCalls: []llmtest.ToolCall{{Name: "calculator", Arguments: fmt.Sprintf(`{"expression":"6*%d"}`, i+1)}},
			Usage: &llmtest.Usage{PromptTokens: 100 + 40*i, CompletionTokens: 12}}
	}
	turns[n-1] = llmtest.Turn{Content: "Done: the last product is 6*" + fmt.Sprint(n-1) + ".", Usage: &llmtest.Usage{PromptTokens: 100 + 40*n, CompletionTokens: 20}}
	earlier := make([]llmtest.Turn, answered)
	for i := range earlier {
		earlier[i] = llmtest.Turn{Content: "never asked: an answer of the history"}
	}
	return llmtest.Scenario{Name: name, Match: name, Turns: append(earlier, turns...)}
}

// startBenchAt starts a mesh whose only target is the OpenAI-compatible model at url.
func startBenchAt(b *testing.B, url string, o benchOptions) *benchMesh {
	b.Helper()
	model := cmp.Or(o.model, benchModel)
	cfg := config.Default()
	cfg.Providers["scripted"] = config.Provider{Type: "openai", BaseURL: url, APIKey: "bench-key"}
	cfg.Targets = []config.Target{{Provider: "scripted", Model: model}}
	cfg.Durability.Checkpoints = o.checkpoints
	cfg.NATS.URL = o.nats
	if o.tools > 0 {
		cfg.RestTools = map[string]config.RestTool{}
		for i := range o.tools {
			cfg.RestTools[fmt.Sprintf("lookup_%02d", i)] = offeredTool(i)
		}
	}
	var (
		tp  = telemetry.NewForwarder(nil)
		sdk *trace.TracerProvider
	)
	if o.tracing {
		sdk = trace.NewTracerProvider(trace.WithBatcher(tracetest.NewNoopExporter()), trace.WithSampler(trace.AlwaysSample()))
		b.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
		tp = sdk
	}
	var providers map[string]generation.Provider
	if o.httpClient != nil {
		providers = map[string]generation.Provider{"scripted": generation.NewOpenAI(generation.OpenAIOptions{
			Name: "scripted", BaseURL: url, APIKey: "bench-key", HTTPClient: o.httpClient})}
	}
	m, err := mesh.Start(context.Background(), mesh.Options{
		Config: cfg, Ephemeral: true, StoreDir: b.TempDir(), Logger: slog.New(slog.DiscardHandler),
		TracerProvider: func(string) oteltrace.TracerProvider { return tp }, InProcess: o.inProcess, Providers: providers,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Close)
	conn, err := grpc.NewClient(m.Addr(mesh.Orchestrator), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	bm := &benchMesh{addr: m.Addr(mesh.Orchestrator), client: agentv1.NewAgentServiceClient(conn), spans: sdk}
	if o.checkpoints {
		if bm.store, err = jetstream.New(m.NATS()); err != nil {
			b.Fatal(err)
		}
	}
	return bm
}

// offeredTool is the i-th of the tools a benchmark offers besides the calculator: a REST tool
// the model never calls, with a schema of the size MCP servers' tools have (some 600 bytes of
// JSON: four properties, an enum, a nested object).
func offeredTool(i int) config.RestTool {
	return config.RestTool{
		Description: fmt.Sprintf("Looks up the records of catalogue %d that match a query, and returns them as JSON.", i),
		URL:         "http://127.0.0.1:9/lookup",
		InputSchema: map[string]any{
			"type":     "object",
			"required": []any{"query"},
			"properties": map[string]any{
				"query": map[string]any{"type": "string", "description": "The words to search for."},
				"limit": map[string]any{"type": "integer", "description": "The most records to return.", "minimum": 1, "maximum": 100},
				"sort":  map[string]any{"type": "string", "enum": []any{"relevance", "newest", "oldest"}},
				"filter": map[string]any{"type": "object", "properties": map[string]any{
					"owner": map[string]any{"type": "string"},
					"tags":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
				}},
			},
		},
	}
}

// run makes one run of req and fails b unless it completes with tools; it returns its turns.
func (m *benchMesh) run(ctx context.Context, b *testing.B, req *agentv1.RunRequest) int {
	res, err := m.client.Run(ctx, req)
	if err != nil || res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		b.Errorf("run %q: %v %s %v", req.GetMessage(), res.GetOutcome(), res.GetExitReason(), err)
		return 0
	}
	return int(res.GetTurns())
}

// toolRequest is the request of a run of turns turns named name, with history.
func toolRequest(name string, turns int, history []*typev1.Message) *agentv1.RunRequest {
	return &agentv1.RunRequest{Message: name, History: history, Overrides: &agentv1.RunOverrides{
		MaxTurns: proto.Int32(int32(turns + 1)), MaxToolCallsTotal: proto.Int32(int32(turns)),
	}}
}

// perTurn measures loop, which makes runs and returns their turns, and reports ns/turn,
// B/turn, allocs/turn and CPU ns/turn (user and system time of the whole process). The CPU,
// bytes and allocations include the retirement of the last runs' records, which follows their
// results (awaitRetired).
func (m *benchMesh) perTurn(b *testing.B, loop func() int) {
	b.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu := cpuTime()
	turns := 0
	for b.Loop() {
		turns += loop()
	}
	m.awaitRetired(b)
	cpu = cpuTime() - cpu
	runtime.ReadMemStats(&after)
	if turns == 0 {
		return
	}
	n := float64(turns)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/turn")
	b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/turn")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/turn")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/turn")
}

// warmUpRuns is how many runs BenchmarkTurn, BenchmarkCheckpoints and BenchmarkConcurrent make
// before they measure: the first run of a mesh pays once for what every later run finds ready
// (the BPE tokenizer's tables, some 0.2 s of CPU for model=gpt-4o; the services' connections;
// the codec's layouts), which a short benchmark would otherwise count as a share of every turn.
const warmUpRuns = 3

// warmUp makes n runs of req, one at a time.
func (m *benchMesh) warmUp(b *testing.B, req *agentv1.RunRequest, n int) {
	b.Helper()
	for range n {
		m.run(b.Context(), b, req)
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// earlier is a conversation of n earlier messages, alternating user and assistant, of about
// 300 bytes each; the first is first, which selects the run's scenario.
func earlier(first string, n int) []*typev1.Message {
	out := make([]*typev1.Message, n)
	for i := range out {
		role, content := typev1.Role_ROLE_USER, fmt.Sprintf("Earlier message %d: ", i)+strings.Repeat("some words of context ", 13)
		if i%2 == 1 {
			role = typev1.Role_ROLE_ASSISTANT
		}
		out[i] = &typev1.Message{Role: role, Content: content}
	}
	if n > 0 {
		out[0].Content = first
	}
	return out
}

// BenchmarkTurn is the mesh's cost per turn, one run at a time (the model in a process of its
// own, so cpu-ns/turn is the mesh's alone): a 10-turn tool run, and a 50-turn run that starts
// with a history of 40 messages (turnRuns; per-turn cost must not grow with the square of the
// conversation: compare their ns/turn), with tracing on and off; both with
// tracing on for a model that selects a BPE tokenizer (model=gpt-4o), where every token count
// is exact rather than estimated; and both with tracing on with every stage served in process
// (stages=inprocess, mesh.Options.InProcess), the floor of the design: the same loop without
// the gRPC transport between the services; the 10-turn run offering 30 more tools
// (tools=30), which every request of a turn carries: what the tools offered cost a turn; and
// the 10-turn run streaming its answers (answers=streamed), as a run started with StreamRun
// does, where the others' runs, started with Run, ask for each answer in one request.
func BenchmarkTurn(b *testing.B) {
	type turnConfig struct {
		turns, history int
		tracing        bool
		model          string
		inProcess      bool
		tools          int
		streamed       bool
	}
	url := modelProcess(b).url
	var configs []turnConfig
	for _, size := range turnRuns {
		configs = append(configs,
			turnConfig{turns: size.turns, history: size.history, tracing: true},
			turnConfig{turns: size.turns, history: size.history, tracing: false},
			turnConfig{turns: size.turns, history: size.history, tracing: true, model: tiktokenModel},
			turnConfig{turns: size.turns, history: size.history, tracing: true, inProcess: true})
	}
	configs = append(configs, turnConfig{turns: benchTurns, tracing: true, tools: offeredTools}, turnConfig{turns: benchTurns, tracing: true, streamed: true})
	for _, tc := range configs {
		name := fmt.Sprintf("turns=%d/tracing=%v", tc.turns, tc.tracing)
		if tc.model != "" {
			name += "/model=" + tc.model
		}
		if tc.inProcess {
			name += "/stages=inprocess"
		}
		if tc.tools > 0 {
			name += fmt.Sprintf("/tools=%d", tc.tools)
		}
		if tc.streamed {
			name += "/answers=streamed"
		}
		b.Run(name, func(b *testing.B) {
			name := turnRunName(tc.turns)
			m := startBenchAt(b, url, benchOptions{tracing: tc.tracing, checkpoints: true, model: tc.model, inProcess: tc.inProcess, tools: tc.tools})
			req := toolRequest(name, tc.turns, earlier(name, tc.history))
			req.Overrides.StreamAnswers = proto.Bool(tc.streamed)
			m.warmUp(b, req, warmUpRuns)
			m.perTurn(b, func() int { return m.run(b.Context(), b, req) })
		})
	}
}

// BenchmarkCheckpoints is what durability costs per turn: the 10-turn run with checkpoints on
// and off.
func BenchmarkCheckpoints(b *testing.B) {
	url := modelProcess(b).url
	for _, on := range []bool{true, false} {
		b.Run(fmt.Sprintf("checkpoints=%v", on), func(b *testing.B) {
			m := startBenchAt(b, url, benchOptions{tracing: true, checkpoints: on})
			req := toolRequest(checkpointsRun, benchTurns, nil)
			m.warmUp(b, req, warmUpRuns)
			m.perTurn(b, func() int { return m.run(b.Context(), b, req) })
		})
	}
}

// BenchmarkConcurrent is throughput: each op is 256 runs of 10 turns at once. turns/s is
// what the machine's cores do together; cpu-ns/turn is what each turn costs them.
func BenchmarkConcurrent(b *testing.B) {
	const runs = 256
	m := startBenchAt(b, modelProcess(b).url, benchOptions{tracing: true, checkpoints: true})
	req := toolRequest(concurrentRun, benchTurns, nil)
	m.warmUp(b, req, warmUpRuns)
	turns := 0
	m.perTurn(b, func() int {
		n := m.runs(b, req, runs)
		turns += n
		return n
	})
	b.ReportMetric(float64(turns)/b.Elapsed().Seconds(), "turns/s")
}

// BenchmarkIdleRun is the memory an in-flight run holds while it waits on the model: each op
// has the model process start 1,000 runs whose first model request its model holds, measures
// this process's live heap and goroutine stacks once every one of them waits, then lets them
// finish. This process holds the mesh alone: the runs' client, their model and the NATS
// server are the model process's. A first wave, not measured, warms the mesh up (connections,
// pools, the stacks a server reuses). It reports the medians over the waves of
// heap-B/idle-run, stack-B/idle-run, their sum B/idle-run, and goroutines/idle-run. The model
// answers over HTTP/2 and TLS as a hosted provider does (provider=http2: the generation
// service's requests share a few connections), or over plain HTTP/1.1 as a local model server
// does (provider=http1: each request in flight has a connection of its own, with its buffers
// and two goroutines of net/http's). The history=40 cases are the same for runs that carry 40
// earlier messages (some 12 KiB): what of the conversation the mesh holds more than once while
// the model answers. provider=http2/tracing=false is the hosted
// provider's case in a deployment that exports no spans, and so records none. In these the
// model holds the requests before it answers (the response's headers not yet sent); in
// provider=http2/answer=streaming the runs stream their answers (as StreamRun's do, where the
// others, started with Run, ask for each answer in one request) and it holds them once the
// answer's first event is out: the run's answer is streaming, as for most of a long answer.
func BenchmarkIdleRun(b *testing.B) {
	const runs = 1000
	model := modelProcess(b)
	for _, tc := range []struct {
		provider  string
		history   int
		untraced  bool
		streaming bool
	}{{"http2", 0, false, false}, {"http1", 0, false, false}, {"http2", idleHistory, false, false}, {"http1", idleHistory, false, false}, {"http2", 0, true, false}, {"http2", 0, false, true}} {
		name := "provider=" + tc.provider
		if tc.history > 0 {
			name += fmt.Sprintf("/history=%d", tc.history)
		}
		if tc.untraced {
			name += "/tracing=false"
		}
		if tc.streaming {
			name += "/answer=streaming"
		}
		b.Run(name, func(b *testing.B) {
			o := benchOptions{tracing: !tc.untraced, checkpoints: true, nats: model.nats}
			url := model.url
			if tc.provider == "http2" {
				url, o.httpClient = model.tlsURL, model.tls
			}
			m := startBenchAt(b, url, o)
			store := natsStore(b, model.nats)
			wave := func() (heap, stacks, goroutines float64) {
				awaitRetired(b, store)
				m.flushSpans(b)
				heap0, stacks0, started := inUse()
				model.ask(b, fmt.Sprintf("%s %d %s %d %t", holdCommand, runs, m.addr, tc.history, tc.streaming), holding)
				m.flushSpans(b)
				heap1, stacks1, waiting := inUse()
				model.ask(b, releaseCommand, released)
				return float64(heap1-heap0) / runs, float64(stacks1-stacks0) / runs, float64(waiting-started) / runs
			}
			wave()
			var heaps, stacks, goroutines []float64
			for b.Loop() {
				h, s, g := wave()
				heaps, stacks, goroutines = append(heaps, h), append(stacks, s), append(goroutines, g)
			}
			b.ReportMetric(median(heaps), "heap-B/idle-run")
			b.ReportMetric(median(stacks), "stack-B/idle-run")
			b.ReportMetric(median(heaps)+median(stacks), "B/idle-run")
			b.ReportMetric(median(goroutines), "goroutines/idle-run")
		})
	}
}

// natsStore is JetStream at the NATS server of url, for awaitRetired.
func natsStore(b *testing.B, url string) jetstream.JetStream {
	b.Helper()
	nc, err := events.Connect(url, "agentmesh-bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	return js
}

// awaitRetired returns once the mesh's store has no run active (awaitRetired); at once for a
// mesh without checkpoints, which keeps no records.
func (m *benchMesh) awaitRetired(b *testing.B) {
	if m.store != nil {
		awaitRetired(b, m.store)
	}
}

// awaitRetired returns once no run is active in the store at js: every run of the last wave
// has retired its records. The orchestrator retires a finished run's records a moment after
// its caller has the result, so the wave's Run calls return first: what the runs still
// retiring hold would otherwise count in the next wave's baseline and be missing from its idle
// runs' share, and the CPU their retirement takes would be missing from the wave's.
func awaitRetired(b *testing.B, js jetstream.JetStream) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := js.Stream(b.Context(), "KV_"+runstore.ActiveBucket)
		if err != nil {
			b.Fatal(err)
		}
		info, err := st.Info(b.Context(), jetstream.WithSubjectFilter(">"))
		if err != nil {
			b.Fatal(err)
		}
		if info.State.NumSubjects == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d runs still active a minute after their wave", info.State.NumSubjects)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// flushSpans exports the spans that ended and wait in the batch span processor's queue (up to
// 2,048, some 2 KiB per idle run of a wave of 1,000 when full), so that the heap measured is
// what the runs hold, not how far the exporter's last batch happens to be.
func (m *benchMesh) flushSpans(b *testing.B) {
	if m.spans == nil {
		return
	}
	if err := m.spans.ForceFlush(b.Context()); err != nil {
		b.Fatal(err)
	}
}

// inUse is the live heap (what a collection found reachable: not the free space of partly
// used spans, which varies from wave to wave), the memory of goroutine stacks and the number
// of goroutines, after two collections: the second empties the sync.Pools' victim caches,
// whose buffers belong to no run (but those the runs hold are theirs).
func inUse() (heap, stacks int64, goroutines int) {
	runtime.GC()
	runtime.GC()
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(samples)
	return int64(samples[0].Value.Uint64()), int64(samples[1].Value.Uint64()), runtime.NumGoroutine()
}

// median is the median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Sorted(slices.Values(xs))
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}

// BenchmarkVsLangGraph makes the same run (9 calculator turns, then the answer, against the
// same scripted model in a process of its own) in the mesh and in LangGraph.js with
// MemorySaver (scripts/langgraph/bench.mjs), one run at a time and 256 at once, and reports
// for each ns/turn and cpu-ns/turn (the mesh's whole process; LangGraph's Node process).
// impl=inprocess is the mesh with every stage called in process (benchOptions.inProcess), the
// floor of the design: what the same runs cost without the gRPC transport between the stages.
// `make bench-langgraph` runs it and prints the ratios with benchstat. The langgraph cases are
// skipped until `npm ci --prefix scripts/langgraph` has installed LangGraph.
func BenchmarkVsLangGraph(b *testing.B) {
	url := modelProcess(b).url
	for _, concurrency := range []int{1, 256} {
		for _, impl := range []string{"mesh", "inprocess"} {
			b.Run(fmt.Sprintf("concurrency=%d/impl=%s", concurrency, impl), func(b *testing.B) {
				m := startBenchAt(b, url, benchOptions{tracing: true, checkpoints: true, inProcess: impl == "inprocess"})
				req := toolRequest(vsLangGraph, benchTurns, nil)
				m.warmUp(b, req, warmup) // as bench.mjs warms its JIT up
				m.perTurn(b, func() int { return m.runs(b, req, concurrency) })
			})
		}
		b.Run(fmt.Sprintf("concurrency=%d/impl=langgraph", concurrency), func(b *testing.B) {
			langGraph(b, url, concurrency)
		})
	}
}

// runs makes n runs of req at once and returns their turns.
func (m *benchMesh) runs(b *testing.B, req *agentv1.RunRequest, n int) int {
	var (
		wg    sync.WaitGroup
		turns atomic.Int64
	)
	for range n {
		wg.Go(func() { turns.Add(int64(m.run(b.Context(), b, req))) })
	}
	wg.Wait()
	return int(turns.Load())
}

// langGraphRuns is the fewest runs langGraph measures: one op of bench.mjs takes over a second
// (Node starting, the warm-up), so the benchmark framework asks for one op, and one run at a
// time would then be one run measured.
const langGraphRuns = 64

// langGraph runs scripts/langgraph/bench.mjs for b.N ops of concurrency runs each (at least
// langGraphRuns runs) and reports what it measured per turn.
func langGraph(b *testing.B, url string, concurrency int) {
	got := benchLangGraph(b, url, vsLangGraph, max(b.N*concurrency, langGraphRuns), concurrency)
	b.ReportMetric(got.ElapsedNS/float64(got.Turns), "ns/turn")
	b.ReportMetric(got.CPUNS/float64(got.Turns), "cpu-ns/turn")
}

// langGraphRun is what one run of bench.mjs measured.
type langGraphRun struct {
	Runs      int     `json:"runs"`
	Turns     int     `json:"turns"`
	ElapsedNS float64 `json:"elapsed_ns"`
	CPUNS     float64 `json:"cpu_ns"`
	RunP50NS  float64 `json:"run_p50_ns"` // a run's own time, from its start to its answer: the median
	RunP99NS  float64 `json:"run_p99_ns"` // and the 99th percentile
}

// benchLangGraph runs scripts/langgraph/bench.mjs against the model at url: runs runs of
// message, concurrency at a time, after warmup runs of vsLangGraph. It skips b when LangGraph
// is not installed.
func benchLangGraph(b *testing.B, url, message string, runs, concurrency int) langGraphRun {
	b.Helper()
	dir := filepath.Join(repoRoot(b), "scripts", "langgraph")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@langchain", "langgraph")); err != nil {
		b.Skip("LangGraph is not installed: npm ci --prefix scripts/langgraph")
	}
	cmd := exec.Command("node", "bench.mjs")
	cmd.Dir, cmd.Stderr = dir, os.Stderr
	cmd.Env = append(os.Environ(), "BASE_URL="+url, "MESSAGE="+message, "WARMUP_MESSAGE="+vsLangGraph,
		fmt.Sprintf("WARMUP=%d", warmup), fmt.Sprintf("RUNS=%d", runs), fmt.Sprintf("CONCURRENCY=%d", concurrency))
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("bench.mjs: %v", err)
	}
	var got langGraphRun
	if err := json.Unmarshal(out, &got); err != nil || got.Turns == 0 {
		b.Fatalf("bench.mjs printed %q: %v", out, err)
	}
	return got
}

// repoRoot is the repository's root: the folder above this package's with go.work.
func repoRoot(b *testing.B) string {
	dir, err := os.Getwd()
	if err != nil {
		b.Fatal(err)
	}
	for ; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		if dir == filepath.Dir(dir) {
			b.Fatal("no go.work above the package")
		}
	}
}

// BenchmarkInFlight is many runs in flight at once, each waiting modelLatency for its one model
// answer (the model in a process of its own): x-model-time is how many times the model's
// latency the whole wave takes to finish, and cpu-ns/run what each run cost the process. Runs
// in flight should cost little while they wait, so a wave of 10,000 should take about the
// model's time, not 10 times it. run-p50-x-model-time and run-p99-x-model-time are what its
// runs took each, from the call to the result, at the median and the 99th percentile: on
// two cores a wave is bound by CPU (docs/performance.md), and these say how a run's own
// latency grows with it. impl=inprocess is the mesh with every stage called in process, the
// design's floor as in BenchmarkVsLangGraph. impl=langgraph is the same wave of LangGraph.js
// runs (bench.mjs, all at once), skipped until `npm ci --prefix scripts/langgraph` has
// installed LangGraph; every side warms up with warmup runs of vsLangGraph first.
func BenchmarkInFlight(b *testing.B) {
	url := modelProcess(b).url
	for _, runs := range []int{1000, 10000} {
		for _, impl := range []string{"mesh", "inprocess"} {
			b.Run(fmt.Sprintf("runs=%d/impl=%s", runs, impl), func(b *testing.B) {
				m := startBenchAt(b, url, benchOptions{tracing: true, checkpoints: true, inProcess: impl == "inprocess"})
				m.warmUp(b, toolRequest(vsLangGraph, benchTurns, nil), warmup)
				var w wave
				for b.Loop() {
					w = m.wave(b, runs)
				}
				w.report(b, runs)
			})
		}
		b.Run(fmt.Sprintf("runs=%d/impl=langgraph", runs), func(b *testing.B) {
			var got langGraphRun
			for b.Loop() {
				got = benchLangGraph(b, url, slowModel, runs, runs)
			}
			if got.Runs != runs || got.Turns != runs {
				b.Fatalf("bench.mjs made %d runs of %d turns, want %d of one", got.Runs, got.Turns, runs)
			}
			w := wave{elapsed: time.Duration(got.ElapsedNS), cpu: time.Duration(got.CPUNS),
				p50: time.Duration(got.RunP50NS), p99: time.Duration(got.RunP99NS)}
			w.report(b, runs)
		})
	}
}

// wave is what a wave of BenchmarkInFlight measured.
type wave struct {
	elapsed, cpu time.Duration // the whole wave's time and its process's CPU
	p50, p99     time.Duration // its runs' own times, the median and the 99th percentile
}

// report reports w, a wave of runs, as BenchmarkInFlight's metrics.
func (w wave) report(b *testing.B, runs int) {
	b.ReportMetric(w.elapsed.Seconds()/modelLatency.Seconds(), "x-model-time")
	b.ReportMetric(float64(w.cpu.Nanoseconds())/float64(runs), "cpu-ns/run")
	b.ReportMetric(w.p50.Seconds()/modelLatency.Seconds(), "run-p50-x-model-time")
	b.ReportMetric(w.p99.Seconds()/modelLatency.Seconds(), "run-p99-x-model-time")
}

// wave makes runs runs of slowModel at once, each answered once, and waits for their records
// to retire, so that the wave's CPU counts their retirement.
func (m *benchMesh) wave(b *testing.B, runs int) wave {
	req := &agentv1.RunRequest{Message: slowModel, Overrides: &agentv1.RunOverrides{ToolPolicy: typev1.ToolPolicy_TOOL_POLICY_FORBIDDEN}}
	start, startCPU := time.Now(), cpuTime()
	var (
		wg     sync.WaitGroup
		failed atomic.Int64
		first  sync.Once
		why    string // the first failure's
		took   = make([]time.Duration, runs)
	)
	for i := range runs {
		wg.Go(func() {
			began := time.Now()
			res, err := m.client.Run(b.Context(), req)
			took[i] = time.Since(began)
			if err != nil || !res.GetSuccess() {
				failed.Add(1)
				first.Do(func() {
					why = fmt.Sprintf("%s %s: %s", res.GetOutcome(), res.GetExitReason(),
						res.GetError().GetMessage())
					if err != nil {
						why = err.Error()
					}
				})
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	m.awaitRetired(b)
	cpu := cpuTime() - startCPU
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d runs failed, the first: %s", n, runs, why)
	}
	slices.Sort(took)
	return wave{elapsed: elapsed, cpu: cpu, p50: took[runs/2], p99: took[runs*99/100]}
}
