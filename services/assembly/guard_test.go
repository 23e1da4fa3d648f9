package assembly_test

import (
	"testing"

	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/services/assembly"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestGuard(t *testing.T) {
	c := newClient(t, assembly.Options{})
	history := []*typev1.Message{usr("U", 4)}
	const (
		ok         = typev1.GuardVerdict_GUARD_VERDICT_OK
		forceFinal = typev1.GuardVerdict_GUARD_VERDICT_FORCE_FINAL
		overflow   = typev1.GuardVerdict_GUARD_VERDICT_OVERFLOW
	)
	// Window 1000, buffer 100, max output 100: limit 800.
	table := []struct {
		name      string
		counters  *typev1.GuardCounters
		ratio     float64
		projected int64
		verdict   typev1.GuardVerdict
		reason    string
	}{
		{"below the limit", &typev1.GuardCounters{Ctx: 500, Pending: 100, New: 50, Schema: 100}, 0, 750, ok, ""},
		{"equal to the limit is ok", &typev1.GuardCounters{Ctx: 500, Pending: 100, New: 100, Schema: 100}, 0, 800, ok, ""},
		{"one over the limit forces the final turn", &typev1.GuardCounters{Ctx: 500, Pending: 100, New: 100, Schema: 101}, 0, 801, forceFinal, "context"},
		{"new tokens count after the flush", &typev1.GuardCounters{Ctx: 500, New: 250, Schema: 51}, 0, 801, forceFinal, "context"},
		{"flushed new tokens count toward the overflow", &typev1.GuardCounters{Ctx: 500, New: 301}, 0, 801, overflow, "context"},
		{"ctx + pending exactly at the limit is not an overflow", &typev1.GuardCounters{Ctx: 700, Pending: 50, New: 50, Schema: 10}, 0, 810, forceFinal, "context"},
		{"ctx + pending over the limit overflows", &typev1.GuardCounters{Ctx: 700, Pending: 50, New: 51}, 0, 801, overflow, "context"},
		{"first turn, nothing counted", &typev1.GuardCounters{Schema: 1}, 0, 1, ok, ""},
		{"ratio not reached", &typev1.GuardCounters{Ctx: 400, Pending: 99, Schema: 0}, 0.5, 499, ok, ""},
		{"ratio reached exactly", &typev1.GuardCounters{Ctx: 400, Pending: 100, Schema: 0}, 0.5, 500, forceFinal, "force_synthesis_at_ratio"},
		{"over the limit wins over the ratio", &typev1.GuardCounters{Ctx: 700, Pending: 50, Schema: 60}, 0.5, 810, forceFinal, "context"},
		{"overflow wins over the ratio", &typev1.GuardCounters{Ctx: 801}, 0.5, 801, overflow, "context"},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{
				History: history, MaxTokens: 100, Counters: tc.counters,
				ContextWindow: 1000, ContextWindowBufferTokens: 100, MaxOutputTokens: 100,
				ForceSynthesisAtRatio: tc.ratio,
			})
			if err != nil {
				t.Fatal(err)
			}
			g := resp.GetGuard()
			if g.GetProjected() != tc.projected || g.GetLimit() != 800 {
				t.Errorf("projected/limit = %d/%d, want %d/800", g.GetProjected(), g.GetLimit(), tc.projected)
			}
			if g.GetVerdict() != tc.verdict || g.GetReason() != tc.reason {
				t.Errorf("verdict = %v %q, want %v %q", g.GetVerdict(), g.GetReason(), tc.verdict, tc.reason)
			}
			if g.GetTrigger() != "turn_preflight" {
				t.Errorf("trigger = %q", g.GetTrigger())
			}
			in := tc.counters
			if got := g.GetCounters(); got.GetNew() != 0 || got.GetPending() != in.GetPending()+in.GetNew() || got.GetCtx() != in.GetCtx() {
				t.Errorf("counters after the flush = %v, want pending %d and new 0", got, in.GetPending()+in.GetNew())
			}
		})
	}
}

func TestGuardSchemaFromTools(t *testing.T) {
	c := newClient(t, assembly.Options{})
	schema, err := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}})
	if err != nil {
		t.Fatal(err)
	}
	tools := []*typev1.Tool{{Name: "search", Description: "Search the knowledge base", InputSchema: schema}}
	want := tokens.Tools(tools)
	req := &contextv1.AssembleRequest{
		History: []*typev1.Message{usr("U", 4)}, MaxTokens: 100, Tools: tools,
		Counters: &typev1.GuardCounters{Ctx: 100}, ContextWindow: 1000,
	}
	resp, err := c.Assemble(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetSchemaTokens() != want || resp.GetGuard().GetCounters().GetSchema() != want || resp.GetGuard().GetProjected() != 100+want {
		t.Errorf("schema_tokens %d, guard schema %d, projected %d; want %d, %d, %d",
			resp.GetSchemaTokens(), resp.GetGuard().GetCounters().GetSchema(), resp.GetGuard().GetProjected(), want, want, 100+want)
	}

	// A schema counter set by the caller (e.g. recomputed for a reduced tool set) wins.
	req.Counters.Schema = 7
	resp, err = c.Assemble(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetGuard().GetCounters().GetSchema() != 7 || resp.GetSchemaTokens() != want {
		t.Errorf("guard schema %d, schema_tokens %d; want 7 and %d", resp.GetGuard().GetCounters().GetSchema(), resp.GetSchemaTokens(), want)
	}
}

func TestGuardOffWithoutWindow(t *testing.T) {
	c := newClient(t, assembly.Options{})
	resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{
		History: []*typev1.Message{usr("U", 4)}, MaxTokens: 100, Counters: &typev1.GuardCounters{Ctx: 1 << 40},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetGuard() != nil {
		t.Errorf("guard = %v, want none when context_window is 0", resp.GetGuard())
	}
}
