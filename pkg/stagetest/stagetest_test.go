package stagetest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/stagetest"
	"github.com/agentmesh/agentmesh/services/planning"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunReportsEveryCase: the report has one result per case of the table, in order; the
// planning stage without a health service fails only the health case, saying why.
func TestRunReportsEveryCase(t *testing.T) {
	conn := grpctest.Serve(t, planning.New(planning.Options{}).Register)
	report, err := stagetest.Run(t.Context(), "planning", conn)
	if err != nil {
		t.Fatal(err)
	}
	cases, err := stagetest.Cases("planning")
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Results) != len(cases) || report.Stage != "planning" {
		t.Fatalf("%s: %d results, want %d", report.Stage, len(report.Results), len(cases))
	}
	for i, res := range report.Results {
		if res.Case != cases[i].Case {
			t.Errorf("result %d is %s, want %s", i, res.Case, cases[i].Case)
		}
		if wantPass := res.Case != "health"; res.Pass != wantPass {
			t.Errorf("%s: pass=%v (%s), want %v", res.Case, res.Pass, res.Reason, wantPass)
		}
	}
	if h := report.Results[0]; !strings.Contains(h.Reason, "Unimplemented") {
		t.Errorf("health reason %q does not say the health service is missing", h.Reason)
	}
	if report.Passed() || report.Failed() != 1 {
		t.Errorf("Passed=%v Failed=%d, want false and 1", report.Passed(), report.Failed())
	}
}

// TestRunUnreachable: nothing listening is ErrUnreachable, not a report of failures; an
// unknown stage is an error naming the stages there are.
func TestRunUnreachable(t *testing.T) {
	conn, err := grpc.NewClient(grpctest.FreeAddr(t), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := stagetest.Run(t.Context(), "planning", conn); !errors.Is(err, stagetest.ErrUnreachable) {
		t.Errorf("err = %v, want ErrUnreachable", err)
	}
	if _, err := stagetest.Run(t.Context(), "nope", conn); err == nil || !strings.Contains(err.Error(), "intent, planning, context") {
		t.Errorf("err = %v, want an unknown stage naming the stages", err)
	}
}

// TestName: a stage's alias names the stage ("agent" is the orchestrator, whose table has
// cases of its own); an unknown name is an error.
func TestName(t *testing.T) {
	for name, want := range map[string]string{"planning": "planning", "orchestrator": "orchestrator", "agent": "orchestrator"} {
		if got, err := stagetest.Name(name); got != want || err != nil {
			t.Errorf("Name(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := stagetest.Name("nope"); err == nil {
		t.Error(`Name("nope") is not an error`)
	}
	cases, err := stagetest.Cases("agent")
	if err != nil || len(cases) < 2 || cases[0].Case != "health" || !strings.Contains(cases[0].Reason, "agentmesh.agent.v1.AgentService") {
		t.Errorf("Cases(agent) = %v, %v; want the public API's table", cases, err)
	}
}
