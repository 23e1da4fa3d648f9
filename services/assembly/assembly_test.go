package assembly_test

import (
	"fmt"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"slices"
	"strings"
	"testing"

	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/recall"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/services/assembly"
	"google.golang.org/grpc/codes"
)

func TestRecencyBias(t *testing.T) {
	c := newClient(t, assembly.Options{})
	// Every message below costs 4 + n tokens: S 10, the others 20 each; 110 in all.
	history := []*typev1.Message{sys("S", 6), usr("U1", 16), asst("A1", 16), usr("U2", 16), asst("A2", 16), usr("U3", 16)}
	table := []struct {
		maxTokens int64
		want      []string
		dropped   int32
	}{
		{110, []string{"S", "U1", "A1", "U2", "A2", "U3"}, 0},
		{1000, []string{"S", "U1", "A1", "U2", "A2", "U3"}, 0},
		{109, []string{"S", "A1", "U2", "A2", "U3"}, 1},
		{50, []string{"S", "A2", "U3"}, 3},
		{49, []string{"S", "U3"}, 4},
		{30, []string{"S", "U3"}, 4},
	}
	for _, tc := range table {
		t.Run(fmt.Sprint(tc.maxTokens), func(t *testing.T) {
			resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{History: history, MaxTokens: tc.maxTokens})
			if err != nil {
				t.Fatal(err)
			}
			if got := labels(resp.GetMessages()); !slices.Equal(got, tc.want) {
				t.Errorf("messages = %v, want %v", got, tc.want)
			}
			if resp.GetDroppedMessages() != tc.dropped {
				t.Errorf("dropped = %d, want %d", resp.GetDroppedMessages(), tc.dropped)
			}
			checkInvariants(t, resp, tc.maxTokens)
		})
	}
}

// Kept history is an unbroken tail: a small old message is not kept past a big one that
// did not fit.
func TestHistoryTailIsUnbroken(t *testing.T) {
	c := newClient(t, assembly.Options{})
	history := []*typev1.Message{sys("S", 6), usr("tiny", 1), asst("BIG", 96), usr("U2", 16)}
	resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{History: history, MaxTokens: 10 + 20 + 50})
	if err != nil {
		t.Fatal(err)
	}
	if got := labels(resp.GetMessages()); !slices.Equal(got, []string{"S", "U2"}) {
		t.Errorf("messages = %v, want [S U2]", got)
	}
	if resp.GetDroppedMessages() != 2 {
		t.Errorf("dropped = %d, want 2", resp.GetDroppedMessages())
	}
}

func TestSystemMessagesKept(t *testing.T) {
	c := newClient(t, assembly.Options{})
	// Only the leading system messages are pinned; a later one is ordinary history.
	history := []*typev1.Message{sys("S1", 6), sys("S2", 6), usr("U1", 16), sys("late", 16), usr("U2", 16)}
	resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{History: history, MaxTokens: 10 + 10 + 20 + 19})
	if err != nil {
		t.Fatal(err)
	}
	if got := labels(resp.GetMessages()); !slices.Equal(got, []string{"S1", "S2", "U2"}) {
		t.Errorf("messages = %v, want [S1 S2 U2]", got)
	}
	if resp.GetDroppedMessages() != 2 {
		t.Errorf("dropped = %d, want 2", resp.GetDroppedMessages())
	}

	resp, err = c.Assemble(t.Context(), &contextv1.AssembleRequest{History: history[:2], MaxTokens: 20})
	if err != nil {
		t.Fatal(err)
	}
	if got := labels(resp.GetMessages()); !slices.Equal(got, []string{"S1", "S2"}) || resp.GetDroppedMessages() != 0 {
		t.Errorf("system-only history: messages = %v, dropped %d", got, resp.GetDroppedMessages())
	}
}

func TestToolPairsNeverSplit(t *testing.T) {
	c := newClient(t, assembly.Options{})
	history := []*typev1.Message{
		sys("S", 6),
		usr("U1", 16),
		call("C1", "c1", "c2"),
		result("c1", 16),
		result("c2", 16),
		asst("A2", 16),
		usr("U2", 16),
	}
	pair := tokens.Messages(history[2:5])
	total := tokens.Messages(history)
	minimum := tokens.Messages([]*typev1.Message{history[0], history[6]})

	t.Run("every budget keeps pairs whole", func(t *testing.T) {
		for budget := minimum; budget <= total; budget++ {
			resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{History: history, MaxTokens: budget})
			if err != nil {
				t.Fatalf("budget %d: %v", budget, err)
			}
			checkInvariants(t, resp, budget)
		}
	})
	t.Run("one token short of the pair drops it whole", func(t *testing.T) {
		budget := minimum + 20 + pair - 1
		resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{History: history, MaxTokens: budget})
		if err != nil {
			t.Fatal(err)
		}
		if got := labels(resp.GetMessages()); !slices.Equal(got, []string{"S", "A2", "U2"}) {
			t.Errorf("messages = %v, want [S A2 U2]", got)
		}
		if resp.GetDroppedMessages() != 4 {
			t.Errorf("dropped = %d, want 4", resp.GetDroppedMessages())
		}
	})
	t.Run("exactly the pair keeps it", func(t *testing.T) {
		resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{History: history, MaxTokens: minimum + 20 + pair})
		if err != nil {
			t.Fatal(err)
		}
		if got := labels(resp.GetMessages()); !slices.Equal(got, []string{"S", "C1", "result-c1", "result-c2", "A2", "U2"}) {
			t.Errorf("messages = %v", got)
		}
	})
	t.Run("a newest tool pair and its user message are the minimum context", func(t *testing.T) {
		h := history[:5]
		need := tokens.Messages(h[:2]) + pair
		resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{History: h, MaxTokens: need})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"S", "U1", "C1", "result-c1", "result-c2"}
		if got := labels(resp.GetMessages()); !slices.Equal(got, want) {
			t.Errorf("messages = %v", got)
		}
		_, err = c.Assemble(t.Context(), &contextv1.AssembleRequest{History: h, MaxTokens: need - 1})
		grpctest.WantStageError(t, err, codes.ResourceExhausted, typev1.StageErrorCode_STAGE_ERROR_CODE_CONTEXT_OVERFLOW,
			fmt.Sprintf("cannot fit the minimum context: %d tokens needed, max_tokens %d", need, need-1))
	})
	t.Run("orphan tool results are never kept", func(t *testing.T) {
		h := []*typev1.Message{sys("S", 6), usr("U1", 16), result("lost", 4), call("C1", "c1"), result("c1", 4), result("c9", 4), usr("U2", 16)}
		resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{History: h, MaxTokens: 10000})
		if err != nil {
			t.Fatal(err)
		}
		if got := labels(resp.GetMessages()); !slices.Equal(got, []string{"S", "U1", "C1", "result-c1", "U2"}) {
			t.Errorf("messages = %v", got)
		}
		// Orphans are never sent, whatever the budget: dropped_messages counts what the
		// budget left out, which a caller must not take for the whole conversation.
		if resp.GetDroppedMessages() != 0 {
			t.Errorf("dropped = %d, want 0: the budget left nothing out", resp.GetDroppedMessages())
		}
		checkInvariants(t, resp, 10000)
	})
	// A history from the API's caller may hold a call whose result is missing, or comes after
	// another message: providers refuse such a call (HTTP 400), and it was kept.
	t.Run("a call without its result is left out", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			history []*typev1.Message
			want    []string
			calls   int // the calls left in the kept assistant message, if any
		}{
			{"one of two answered", []*typev1.Message{sys("S", 6), usr("U1", 8), call("C1", "c1", "c2"), result("c1", 4), usr("U2", 8)},
				[]string{"S", "U1", "C1", "result-c1", "U2"}, 1},
			{"the result after another message", []*typev1.Message{sys("S", 6), usr("U1", 8), call("", "c1"), usr("U2", 8), result("c1", 4), usr("U3", 8)},
				[]string{"S", "U1", "U2", "U3"}, 0},
			{"a call with text and no result", []*typev1.Message{sys("S", 6), usr("U1", 8), call("C1", "c1"), usr("U2", 8)},
				[]string{"S", "U1", "C1", "U2"}, 0},
			// A call and a result without an id were kept as a pair: providers refuse both.
			{"a call and a result without an id", []*typev1.Message{sys("S", 6), usr("U1", 8),
				call("C1", ""), result("", 4), usr("U2", 8)},
				[]string{"S", "U1", "C1", "U2"}, 0},
			// Two calls of one id answered once were both kept: providers refuse the second.
			{"two calls of one id", []*typev1.Message{sys("S", 6), usr("U1", 8),
				call("C1", "c1", "c1"), result("c1", 4), usr("U2", 8)},
				[]string{"S", "U1", "C1", "result-c1", "U2"}, 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{History: tc.history, MaxTokens: 10000})
				if err != nil {
					t.Fatal(err)
				}
				if got := labels(resp.GetMessages()); !slices.Equal(got, tc.want) {
					t.Errorf("messages = %v, want %v", got, tc.want)
				}
				if resp.GetDroppedMessages() != 0 {
					t.Errorf("dropped = %d, want 0: the budget left nothing out", resp.GetDroppedMessages())
				}
				for _, m := range resp.GetMessages() {
					if m.GetRole() == typev1.Role_ROLE_ASSISTANT && len(m.GetToolCalls()) != tc.calls {
						t.Errorf("the assistant message keeps %d calls, want %d", len(m.GetToolCalls()), tc.calls)
					}
				}
				checkInvariants(t, resp, 10000)
			})
		}
	})
}

func TestContextOverflow(t *testing.T) {
	c := newClient(t, assembly.Options{})
	history := []*typev1.Message{sys("S", 6), usr("U1", 16), usr("U2", 16)}
	_, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{History: history, MaxTokens: 29})
	grpctest.WantStageError(t, err, codes.ResourceExhausted, typev1.StageErrorCode_STAGE_ERROR_CODE_CONTEXT_OVERFLOW,
		"cannot fit the minimum context: 30 tokens needed, max_tokens 29")

	resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{History: history, MaxTokens: 30})
	if err != nil {
		t.Fatalf("exactly the minimum must fit: %v", err)
	}
	if resp.GetTokenCount() != 30 {
		t.Errorf("token_count = %d, want 30", resp.GetTokenCount())
	}
}

func TestCurrentStep(t *testing.T) {
	c := newClient(t, assembly.Options{})
	history := []*typev1.Message{sys("S1", 6), sys("S2", 6), usr("U1", 16), usr("U2", 16)}
	step := &typev1.Step{Id: "s2", Description: "Fetch the release notes", ToolName: "web__fetch"}
	wantText := "Current step s2: Fetch the release notes (tool: web__fetch)"
	stepTokens := tokens.Message(&typev1.Message{Content: wantText})

	t.Run("placed after the leading system messages, with a plan source", func(t *testing.T) {
		resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{History: history, MaxTokens: 1000, CurrentStep: step})
		if err != nil {
			t.Fatal(err)
		}
		msgs := resp.GetMessages()
		if len(msgs) != 5 || msgs[2].GetContent() != wantText || msgs[2].GetRole() != typev1.Role_ROLE_SYSTEM {
			t.Fatalf("messages = %v", labels(msgs))
		}
		src := resp.GetSources()
		if len(src) != 1 || src[0].GetKind() != "plan" || src[0].GetId() != "s2" {
			t.Errorf("sources = %v", src)
		}
		checkInvariants(t, resp, 1000)
	})
	t.Run("a step without a tool", func(t *testing.T) {
		resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{History: history, MaxTokens: 1000,
			CurrentStep: &typev1.Step{Id: "s1", Description: "Think"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.GetMessages()[2].GetContent(); got != "Current step s1: Think" {
			t.Errorf("step message = %q", got)
		}
	})
	t.Run("the step goes before older history", func(t *testing.T) {
		budget := 40 + stepTokens
		resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{History: history, MaxTokens: budget, CurrentStep: step})
		if err != nil {
			t.Fatal(err)
		}
		if got := labels(resp.GetMessages()); !slices.Equal(got, []string{"S1", "S2", wantText, "U2"}) {
			t.Errorf("messages = %v", got)
		}
	})
	t.Run("left out when it does not fit", func(t *testing.T) {
		resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{History: history, MaxTokens: 40 + stepTokens - 1, CurrentStep: step})
		if err != nil {
			t.Fatal(err)
		}
		if got := labels(resp.GetMessages()); !slices.Equal(got, []string{"S1", "S2", "U2"}) || len(resp.GetSources()) != 0 {
			t.Errorf("messages = %v, sources %v", got, resp.GetSources())
		}
	})
}

// TestPlanProgress shows the model where the whole plan stands: each step with its state, the
// current one marked, after the current step's line.
func TestPlanProgress(t *testing.T) {
	c := newClient(t, assembly.Options{})
	history := []*typev1.Message{sys("S", 6), usr("U", 16)}
	progress := func(id, desc, tool string, st typev1.StepState, note string, deps ...string) *typev1.StepProgress {
		return &typev1.StepProgress{Step: &typev1.Step{Id: id, Description: desc, ToolName: tool, DependsOn: deps}, State: st, Note: note}
	}
	plan := []*typev1.StepProgress{
		progress("step-1", "Read the clock", "current_time", typev1.StepState_STEP_STATE_DONE, "call_1 succeeded in turn 1"),
		progress("step-2", "Divide the numbers", "calculator", typev1.StepState_STEP_STATE_FAILED, "division by zero", "step-1"),
		progress("step-3", "Explain the result", "", typev1.StepState_STEP_STATE_PENDING, "", "step-1"),
		progress("step-4", "Write the summary", "", typev1.StepState_STEP_STATE_PENDING, "", "step-3"),
	}
	for _, tc := range []struct {
		name    string
		current *typev1.Step
		plan    []*typev1.StepProgress
		want    string
		source  string
	}{
		{"a plan under way", plan[2].GetStep(), plan, "Current step step-3: Explain the result\n" +
			"Plan progress: 1 of 4 steps done.\n" +
			"- step-1 [done]: Read the clock (tool: current_time)\n" +
			"- step-2 [failed: division by zero]: Divide the numbers (tool: calculator)\n" +
			"- step-3 [current]: Explain the result\n" +
			"- step-4 [pending, after step-3]: Write the summary", "step-3"},
		{"every step done", nil, plan[:1], "Every step of the plan is done.\nPlan progress: 1 of 1 steps done.\n- step-1 [done]: Read the clock (tool: current_time)", "plan"},
		// A failed step is not done: the model was told every step was, over the failure.
		{"no step current after a failure", nil, plan[:2], "No step of the plan is current, and not every step is done.\nPlan progress: 1 of 2 steps done.\n" +
			"- step-1 [done]: Read the clock (tool: current_time)\n" +
			"- step-2 [failed: division by zero]: Divide the numbers (tool: calculator)", "plan"},
		{"one pending step is only the current step", plan[2].GetStep(), []*typev1.StepProgress{progress("step-3", "Explain the result", "", typev1.StepState_STEP_STATE_PENDING, "")},
			"Current step step-3: Explain the result", "step-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{History: history, MaxTokens: 1000, CurrentStep: tc.current, Plan: tc.plan})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.GetMessages()[1].GetContent(); got != tc.want {
				t.Errorf("plan message =\n%s\nwant\n%s", got, tc.want)
			}
			if src := resp.GetSources(); len(src) != 1 || src[0].GetKind() != "plan" || src[0].GetId() != tc.source {
				t.Errorf("sources = %v", src)
			}
		})
	}
}

func TestInvalidInput(t *testing.T) {
	c := newClient(t, assembly.Options{})
	ok := []*typev1.Message{usr("U", 4)}
	recalled := make([]*memoryv1.MemoryHit, recall.MaxHits+1)
	for i := range recalled {
		recalled[i] = &memoryv1.MemoryHit{Memory: &memoryv1.Memory{Id: fmt.Sprint("m", i), Content: "x"}}
	}
	table := []struct {
		name string
		req  *contextv1.AssembleRequest
		part string
	}{
		{"zero max_tokens", &contextv1.AssembleRequest{History: ok}, "max_tokens must be positive"},
		{"negative max_tokens", &contextv1.AssembleRequest{History: ok, MaxTokens: -5}, "max_tokens must be positive, got -5"},
		{"empty history", &contextv1.AssembleRequest{MaxTokens: 100}, "history must not be empty"},
		{"message without role", &contextv1.AssembleRequest{MaxTokens: 100, History: []*typev1.Message{usr("U", 4), {Content: "x"}}}, "history[1].role"},
		{"negative ctx", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, Counters: &typev1.GuardCounters{Ctx: -1}}, "counters.ctx must not be negative"},
		{"negative pending", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, Counters: &typev1.GuardCounters{Pending: -1}}, "counters.pending"},
		{"negative new", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, Counters: &typev1.GuardCounters{New: -1}}, "counters.new"},
		{"negative schema", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, Counters: &typev1.GuardCounters{Schema: -1}}, "counters.schema"},
		{"huge ctx", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, Counters: &typev1.GuardCounters{Ctx: 1 << 62}}, "counters.ctx is"},
		{"negative window", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, ContextWindow: -1}, "context_window must not be negative"},
		{"negative buffer", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, ContextWindowBufferTokens: -1}, "context_window_buffer_tokens"},
		{"negative max output", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, MaxOutputTokens: -1}, "max_output_tokens"},
		{"ratio above 1", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, ForceSynthesisAtRatio: 1.01}, "force_synthesis_at_ratio"},
		{"negative ratio", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, ForceSynthesisAtRatio: -0.1}, "force_synthesis_at_ratio"},
		{"negative memory limit", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, MemoryLimit: -1}, "memory_limit"},
		{"memory limit over a search's", &contextv1.AssembleRequest{History: ok, MaxTokens: 100,
			MemoryLimit: recall.MaxHits + 1}, "memory_limit must be at most 100, got 101"},
		{"memory query without user", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, MemoryQuery: "x"}, "user_id"},
		// The memory stage refuses such a user, which was reported as memory_unavailable.
		{"user over 256 bytes", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, MemoryQuery: "x", UserId: strings.Repeat("u", 257)}, "user_id: at most 256 bytes, got 257"},
		// The generation stage refuses a longer model name (a request's target).
		{"model over 256 bytes", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, Model: strings.Repeat("m", 257)}, "model: at most 256 bytes, got 257"},
		{"run id over 128 bytes", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, RunId: strings.Repeat("r", 129)}, "run_id: run id is 129 bytes long; at most 128 are allowed"},
		{"run id with a dot", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, RunId: "run.1"}, `run_id: run id "run.1" contains '.' at byte 3`},
		{"step without id", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, CurrentStep: &typev1.Step{Description: "x"}}, "current_step.id"},
		{"plan step without id", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, Plan: []*typev1.StepProgress{{Step: &typev1.Step{Id: "a"}, State: typev1.StepState_STEP_STATE_PENDING}, {}}}, "plan[1].step.id"},
		// A step without a state was shown to the model as pending, or as current.
		{"plan step without state", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, Plan: []*typev1.StepProgress{{Step: &typev1.Step{Id: "a"}}}},
			"plan[0].state must be pending, done or failed, got STEP_STATE_UNSPECIFIED"},
		{"plan step of an unknown state", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, Plan: []*typev1.StepProgress{{Step: &typev1.Step{Id: "a"}, State: 9}}},
			"plan[0].state must be pending, done or failed, got 9"},
		// A search finds at most 100 memories: a longer list was chosen from in quadratic time.
		{"recalled over the limit", &contextv1.AssembleRequest{History: ok, MaxTokens: 100, Recalled: recalled},
			"recalled: at most 100 memories, got 101"},
		{"reserved space fills the window", &contextv1.AssembleRequest{History: ok, MaxTokens: 100,
			ContextWindow: 1000, ContextWindowBufferTokens: 200, MaxOutputTokens: 800}, "context_window 1000 leaves no room"},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Assemble(t.Context(), tc.req)
			grpctest.WantStageError(t, err, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, tc.part)
		})
	}
}

// TestModelAtTheLimit: a model name of 256 bytes, the generation stage's limit, is taken
// (TestInvalidInput refuses one byte more).
func TestModelAtTheLimit(t *testing.T) {
	c := newClient(t, assembly.Options{})
	req := &contextv1.AssembleRequest{History: []*typev1.Message{usr("U", 4)}, MaxTokens: 100, Model: strings.Repeat("m", 256)}
	if _, err := c.Assemble(t.Context(), req); err != nil {
		t.Fatalf("a model of 256 bytes was refused: %v", err)
	}
}

// TestLatestUserMessageKept: the latest user message is kept with the newest history, so a
// turn deep in tool calls still has the request they serve; it was the first left out, and
// the model went on calling tools without the question.
func TestLatestUserMessageKept(t *testing.T) {
	c := newClient(t, assembly.Options{})
	history := []*typev1.Message{
		sys("S", 6), usr("U1", 16), asst("A1", 16), usr("U2", 16),
		call("C1", "c1"), result("c1", 16), call("C2", "c2"), result("c2", 16),
	}
	minimum := tokens.Messages([]*typev1.Message{history[0], history[3], history[6], history[7]})
	pair := tokens.Messages(history[4:6])
	for _, tc := range []struct {
		maxTokens int64
		want      []string
		dropped   int32
	}{
		{minimum, []string{"S", "U2", "C2", "result-c2"}, 4},
		{minimum + pair, []string{"S", "U2", "C1", "result-c1", "C2", "result-c2"}, 2},
		{minimum + pair + 20, []string{"S", "A1", "U2", "C1", "result-c1", "C2", "result-c2"}, 1},
	} {
		t.Run(fmt.Sprint(tc.maxTokens), func(t *testing.T) {
			resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{
				History: history, MaxTokens: tc.maxTokens})
			if err != nil {
				t.Fatal(err)
			}
			if got := labels(resp.GetMessages()); !slices.Equal(got, tc.want) {
				t.Errorf("messages = %v, want %v", got, tc.want)
			}
			if resp.GetDroppedMessages() != tc.dropped {
				t.Errorf("dropped = %d, want %d", resp.GetDroppedMessages(), tc.dropped)
			}
			checkInvariants(t, resp, tc.maxTokens)
		})
	}
	_, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{
		History: history, MaxTokens: minimum - 1})
	grpctest.WantStageError(t, err, codes.ResourceExhausted,
		typev1.StageErrorCode_STAGE_ERROR_CODE_CONTEXT_OVERFLOW,
		fmt.Sprintf("cannot fit the minimum context: %d tokens needed", minimum))
}
