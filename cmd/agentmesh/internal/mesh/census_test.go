package mesh_test

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	oteltrace "go.opentelemetry.io/otel/trace"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
)

// TestWhatARunRequests pins what a durable run asks of NATS and of the stages from its start
// to its retirement: every message JetStream stores and acknowledges, every API request it
// answers, and every gRPC call, each a round trip the run pays for, and the spans its trace
// gets for them. Those counts, more than what each request costs, bound the mesh's throughput
// (issue 15; docs/performance.md counts them session by session), so a change that adds a
// request or a span to every run or every turn fails here, naming it, and a change that means
// to updates the counts. A run's requests to NATS all go out on the mesh's one connection, in
// order, and its retirement's purge of its owner entry is the last of them.
func TestWhatARunRequests(t *testing.T) {
	h := start(t, nil,
		llmtest.Scenario{Name: "answer", Match: "census answer", Turns: []llmtest.Turn{text("an answer")}},
		llmtest.Scenario{Name: "tools", Match: "census tools", Turns: []llmtest.Turn{calcTurn("c1", "6*7"), calcTurn("c2", "6*8"), text("42, then 48")}},
	)
	// What every run asks: its events from run_started to run_finished, its checkpoint when it
	// starts, after PLAN and at TERMINATE (with its result), its entry among the active runs,
	// the stages from intent to memory; and once the memory stage has its result, its tombstone
	// and the purges of its checkpoint, its inputs and its entry. Its trace has its own span,
	// those of the states before and after its turns, and the memory stage's learning from it
	// (after SaveRun has answered).
	once := map[string]int{
		"event run_started": 1, "event intent_parsed": 1, "event plan_created": 1, "event run_finished": 1,
		"put AGENTMESH_CHECKPOINTS": 3, "put AGENTMESH_RUN_OWNERS": 1, "put AGENTMESH_FINISHED_RUNS": 1,
		"purge KV_AGENTMESH_CHECKPOINTS": 1, "purge KV_AGENTMESH_RUN_INPUTS": 1, "purge KV_AGENTMESH_RUN_OWNERS": 1,
	}
	stepsOnce := map[string]int{
		"internal agentmesh.run": 1, "internal agentmesh.precheck": 1, "internal agentmesh.intent": 1,
		"internal agentmesh.plan": 1, "internal agentmesh.terminate": 1, "internal agentmesh.memory.learn": 1,
	}
	calledOnce := map[string]int{
		"agentmesh.intent.v1.IntentService/Parse": 1, "agentmesh.planning.v1.PlanningService/Plan": 1,
		"agentmesh.memory.v1.MemoryService/Search": 1, "agentmesh.memory.v1.MemoryService/SaveRun": 1,
	}
	// What every turn asks: three events, the context stage's assembly and the model, in four
	// states, with a span of the model's call.
	turn := map[string]int{"event turn_started": 1, "event context_guard": 1, "event llm_response": 1}
	stepsATurn := map[string]int{
		"internal agentmesh.assemble": 1, "internal agentmesh.infer": 1, "client chat gpt-test": 1,
		"internal agentmesh.validate_calls": 1, "internal agentmesh.commit": 1,
	}
	calledATurn := map[string]int{"agentmesh.context.v1.ContextService/Assemble": 1, "agentmesh.generation.v1.GenerationService/Generate": 1}
	// What a turn with a tool call asks besides: two events, the checkpoint of its validated
	// call and the one at COMMIT, the call's record (one, done: the calculator is idempotent),
	// the action and observation stages, in two states.
	toolTurn := map[string]int{"event tool_started": 1, "event tool_finished": 1, "put AGENTMESH_CHECKPOINTS": 2, "put AGENTMESH_TOOL_CALLS": 1}
	calledAToolTurn := map[string]int{"agentmesh.action.v1.ActionService/Execute": 1, "agentmesh.observation.v1.ObservationService/Observe": 1}
	stepsAToolTurn := map[string]int{"internal agentmesh.execute": 1, "internal execute_tool calculator": 1, "internal agentmesh.observe": 1}
	// What the tool run asks besides: the calls left the rules planner's plan, which the run
	// revises once; its request, contract and offered tools outgrow a checkpoint's tail and go
	// to its checkpoint log as a segment, which its retirement reads (for objects it names) and
	// purges.
	revised := map[string]int{
		"event plan_revised": 1, "segment": 1, "read AGENTMESH_CHECKPOINT_LOG": 1, "purge AGENTMESH_CHECKPOINT_LOG": 1,
	}
	calledToRevise := map[string]int{"agentmesh.planning.v1.PlanningService/Plan": 1}
	stepsToRevise := map[string]int{"internal agentmesh.plan": 1}

	for _, tc := range []struct {
		message  string
		requests map[string]int
		calls    map[string]int
		steps    map[string]int
	}{
		{"census answer", sum(once, turn), sum(calledOnce, calledATurn), sum(stepsOnce, stepsATurn)},
		{
			"census tools", sum(once, turn, turn, turn, toolTurn, toolTurn, revised),
			sum(calledOnce, calledATurn, calledATurn, calledATurn, calledAToolTurn, calledAToolTurn, calledToRevise),
			sum(stepsOnce, stepsATurn, stepsATurn, stepsATurn, stepsAToolTurn, stepsAToolTurn, stepsToRevise),
		},
	} {
		t.Run(tc.message, func(t *testing.T) {
			msgs := h.subscribe(t, ">")
			res := h.run(t, &agentv1.RunRequest{Message: tc.message})
			if got := requestsOf(t, msgs, res.GetRunId()); !maps.Equal(got, tc.requests) {
				t.Errorf("run %s asked NATS for\n%swant\n%s", res.GetRunId(), census(got), census(tc.requests))
			}
			// A stage's server span ends once its answer is sent, which may be after the run has
			// its result: the spans are read until they are all there.
			want := spansOf(tc.requests, tc.calls, tc.steps)
			var got map[string]int
			if !eventually(t, 10*time.Second, func() bool { got = traceOf(t, h, res.GetTraceId()); return maps.Equal(got, want) }) {
				t.Errorf("run %s has the spans\n%swant\n%s", res.GetRunId(), census(got), census(want))
			}
		})
	}
}

// sum adds counts up.
func sum(counts ...map[string]int) map[string]int {
	total := map[string]int{}
	for _, c := range counts {
		for k, n := range c {
			total[k] += n
		}
	}
	return total
}

// requestsOf counts the requests to NATS that name the run runID, from msgs (every message
// published) until the purge of the run's owner entry, by what they are: "event <kind>", "put
// <bucket>" (a key-value write; "del" and "purge" a key's removal), "segment" (of the run's checkpoint log), "purge <stream>",
// "read <stream>", and "other <subject>" for anything else.
func requestsOf(t *testing.T, msgs <-chan *nats.Msg, runID string) map[string]int {
	t.Helper()
	got := map[string]int{}
	retired := "purge KV_" + runstore.ActiveBucket
	deadline := time.After(30 * time.Second)
	for got[retired] == 0 {
		select {
		case msg := <-msgs:
			if what := requestOf(msg, runID); what != "" {
				got[what]++
			}
		case <-deadline:
			t.Fatalf("run %s not retired after 30s; it asked NATS for\n%s", runID, census(got))
		}
	}
	return got
}

// kvOperation is the header of a key-value bucket's message that deletes or purges its key.
const kvOperation = "KV-Operation"

// requestOf is what msg asks of NATS for the run runID, "" when it is not the run's (another
// run's, a heartbeat, a reply, the server's own advisories).
func requestOf(msg *nats.Msg, runID string) string {
	subject := msg.Subject
	if strings.HasPrefix(subject, "_INBOX.") || strings.HasPrefix(subject, "$JS.EVENT.") ||
		!strings.Contains(subject, runID) && !strings.Contains(string(msg.Data), runID) {
		return ""
	}
	parts := strings.Split(subject, ".")
	switch {
	case strings.HasPrefix(subject, "agentmesh.run."):
		return "event " + parts[len(parts)-1]
	case strings.HasPrefix(subject, "agentmesh.checkpoint.segment."):
		return "segment"
	case strings.HasPrefix(subject, "$KV.") && len(parts) > 1:
		if op := msg.Header.Get(kvOperation); op != "" {
			return strings.ToLower(op) + " " + parts[1] // a key deleted or purged
		}
		return "put " + parts[1]
	case strings.HasPrefix(subject, "$JS.API.STREAM.PURGE.") && len(parts) > 4:
		return "purge " + parts[4]
	case strings.HasPrefix(subject, "$JS.API.DIRECT.GET.") && len(parts) > 4:
		return "read " + parts[4]
	case strings.HasPrefix(subject, "$JS.API.STREAM.MSG.GET.") && len(parts) > 5:
		return "read " + parts[5]
	}
	return "other " + subject
}

// traceOf counts the spans of the trace traceID by kind and name. The calls of ListTools and
// ListProviders are left out: a replica keeps their answers for a second, so whether a run
// makes them depends on when it starts.
func traceOf(t *testing.T, h *harness, traceID string) map[string]int {
	t.Helper()
	id, err := oteltrace.TraceIDFromHex(traceID)
	if err != nil {
		t.Fatalf("trace id %q: %v", traceID, err)
	}
	spans := map[string]int{}
	for _, s := range h.recorder.Trace(id) {
		if name := s.Name(); !strings.HasSuffix(name, "/ListTools") && !strings.HasSuffix(name, "/ListProviders") {
			spans[s.SpanKind().String()+" "+name]++
		}
	}
	return spans
}

// spansOf is the spans of a run that asks NATS for requests and calls the stages' methods
// calls, in the states and model calls steps: a producer span an event, a client and a server
// span a call, and the server span of the Run call that started it (its client, the test, is
// not traced).
func spansOf(requests, calls, steps map[string]int) map[string]int {
	spans := maps.Clone(steps)
	for what, n := range requests {
		if kind, ok := strings.CutPrefix(what, "event "); ok {
			spans["producer publish agentmesh.run.{run_id}."+kind] += n
		}
	}
	for method, n := range calls {
		spans["client "+method] += n
		spans["server "+method] += n
	}
	spans["server agentmesh.agent.v1.AgentService/Run"]++
	return spans
}

// census prints counts one a line, sorted.
func census(counts map[string]int) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		b.WriteString("\t" + k + ": " + strconv.Itoa(counts[k]) + "\n")
	}
	return b.String()
}
