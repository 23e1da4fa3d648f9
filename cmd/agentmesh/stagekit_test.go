package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/pkg/stagetest"
)

// conformance runs `agentmesh conformance` with args and returns its output and exit code.
func conformance(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), append([]string{"conformance"}, args...), &out, &errOut)
	return out.String(), errOut.String(), code
}

// caseLine matches a result row of the table: case, verdict, reason.
var caseLine = regexp.MustCompile(`(?m)^(\S+)\s+(PASS|FAIL)\s+(.*)$`)

// verdicts returns the verdict of every case in a printed table, by case name.
func verdicts(out string) map[string]string {
	v := map[string]string{}
	for _, m := range caseLine.FindAllStringSubmatch(out, -1) {
		v[m[1]] = m[2] + " " + m[3]
	}
	return v
}

// TestConformanceStages: each of the project's own stages, served on a real gRPC port by the
// in-process mesh with its default configuration, passes its conformance kit through the CLI:
// exit 0 and a PASS row for every case of the stage's table.
func TestConformanceStages(t *testing.T) {
	isolate(t)
	m := startMesh(t, nil)
	for _, stage := range stagetest.Stages() {
		t.Run(stage, func(t *testing.T) { passesConformance(t, stage, m.Addr(stage)) })
	}
}

// TestConformanceProviderFailures: with --provider-addr the kit serves a scripted provider
// there, and the project's generation stage, whose provider "stagekit" sends its requests to
// it, classifies each of the provider's failures as the contract says: every provider case
// passes, through the CLI.
func TestConformanceProviderFailures(t *testing.T) {
	isolate(t)
	addr := grpctest.FreeAddr(t)
	cfg := config.Default()
	cfg.Providers[stagetest.ProviderName] = config.Provider{Type: "openai", BaseURL: "http://" + addr + "/v1", APIKey: "stagekit-key"}
	m := startMesh(t, cfg)
	passesConformance(t, mesh.Generation, m.Addr(mesh.Generation), "--provider-addr", addr)
}

// TestConformanceProviderAddrInUse: a --provider-addr where the kit cannot listen is an
// invalid argument (exit 4) that names the address, not a table of failures.
func TestConformanceProviderAddrInUse(t *testing.T) {
	isolate(t)
	m := startMesh(t, nil)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	out, errOut, code := conformance(t, "--stage", "generation", "--addr", m.Addr(mesh.Generation), "--provider-addr", taken.Addr().String())
	if code != exitcode.Invalid || !strings.Contains(errOut, "cannot listen on "+taken.Addr().String()) {
		t.Errorf("exit %d, stderr %q, want %d naming the address\n%s", code, errOut, exitcode.Invalid, out)
	}
}

// passesConformance runs `agentmesh conformance --stage stage --addr addr` (with extra, e.g.
// --provider-addr HOST:PORT) and fails t unless it exits 0 with a PASS row for every case of
// the stage's table.
func passesConformance(t *testing.T, stage, addr string, extra ...string) {
	t.Helper()
	out, errOut, code := conformance(t, append([]string{"--stage", stage, "--addr", addr}, extra...)...)
	if code != exitcode.OK {
		t.Fatalf("exit %d, want 0\n%s%s", code, out, errOut)
	}
	var opts stagetest.Options
	if i := slices.Index(extra, "--provider-addr"); i >= 0 {
		opts.ProviderAddr = extra[i+1]
	}
	cases, err := stagetest.CasesWith(stage, opts)
	if err != nil {
		t.Fatal(err)
	}
	got := verdicts(out)
	for _, c := range cases {
		if v := got[c.Case]; !strings.HasPrefix(v, "PASS ") {
			t.Errorf("case %s: %q, want PASS\n%s", c.Case, v, out)
		}
	}
	if want := fmt.Sprintf("%d cases: %d passed, 0 failed", len(cases), len(cases)); !strings.Contains(out, want) {
		t.Errorf("no summary %q:\n%s", want, out)
	}
}

// TestConformanceAll: --stage all checks every stage at its configured address; one stage
// where nothing answers is reported unreachable and the command exits 3.
func TestConformanceAll(t *testing.T) {
	isolate(t)
	m := startMesh(t, nil)
	closed := grpctest.FreeAddr(t)
	cfg := fmt.Sprintf("services:\n  intent: %s\n  planning: %s\n  context: %s\n  generation: %s\n  action: %s\n  observation: %s\n  memory: %s\n  recovery: %s\n  orchestrator: %s\n",
		m.Addr(mesh.Intent), m.Addr(mesh.Planning), m.Addr(mesh.Context), m.Addr(mesh.Generation),
		m.Addr(mesh.Action), m.Addr(mesh.Observation), m.Addr(mesh.Memory), closed, m.Addr(mesh.Orchestrator))
	path := filepath.Join(t.TempDir(), "agentmesh.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTMESH_CONFIG", path)
	out, errOut, code := conformance(t, "--stage", "all")
	if code != exitcode.Unavailable {
		t.Fatalf("exit %d, want 3 (recovery unreachable)\n%s%s", code, out, errOut)
	}
	for name, v := range verdicts(out) {
		if !strings.HasPrefix(v, "PASS ") {
			t.Errorf("case %s of a reachable stage: %s", name, v)
		}
	}
	for _, stage := range stagetest.Stages() {
		if stage != mesh.Recovery && !strings.Contains(out, stage+" at "+m.Addr(stage)+"\n") {
			t.Errorf("no table of %s:\n%s", stage, out)
		}
	}
	if want := "recovery at " + closed + ": unreachable"; !strings.Contains(out, want) || !strings.Contains(errOut, closed) {
		t.Errorf("want %q on stdout and the address on stderr:\n%s%s", want, out, errOut)
	}
}

// TestConformanceBrokenPlanning: a planning stage that answers every request, valid or not,
// with a cyclic plan using a tool nobody offered fails the kit: exit 1, FAIL rows saying how.
func TestConformanceBrokenPlanning(t *testing.T) {
	srv := server.New(server.Options{Name: "planning", Addr: "127.0.0.1:0"})
	planningv1.RegisterPlanningServiceServer(srv.GRPC(), brokenPlanner{})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })

	out, errOut, code := conformance(t, "--stage", "planning", "--addr", srv.Addr())
	if code != exitcode.Failed {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	got := verdicts(out)
	for name, want := range map[string]string{
		"health":              "PASS",
		"plan-keeps-contract": `FAIL the plan breaks the contract: step "a" uses tool "rm_everything", which is not available`,
		"no-tool-can-serve":   "FAIL answered OK, want FailedPrecondition with StageError NO_VIABLE_PLAN",
		"empty-goal":          "FAIL answered OK, want InvalidArgument with StageError INVALID_INPUT",
	} {
		if !strings.HasPrefix(got[name], want) {
			t.Errorf("case %s: %q, want %q...", name, got[name], want)
		}
	}
	if !strings.Contains(errOut, "planning (") || !strings.Contains(errOut, "failed") {
		t.Errorf("stderr %q does not say the stage failed", errOut)
	}
}

// TestConformanceREADMEExample: the README's example of a report ("Swapping a stage", of a
// planning stage that answers every request with brokenPlanner's plan) is what the command
// prints for such a stage: its first rows, its summary, its error, and the count of cases the
// project's own stage passes.
func TestConformanceREADMEExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const exampleAddr = "10.0.3.7:7002"
	_, example, ok := strings.Cut(string(readme), "```\nplanning at "+exampleAddr+"\n")
	if !ok {
		t.Fatal("README.md has no example report of planning at " + exampleAddr)
	}
	example, after, _ := strings.Cut(example, "```")
	rows, tail, ok := strings.Cut(example, "...\n")
	if !ok {
		t.Fatalf("the README's example report has no ... line:\n%s", example)
	}

	srv := server.New(server.Options{Name: "planning", Addr: "127.0.0.1:0"})
	planningv1.RegisterPlanningServiceServer(srv.GRPC(), brokenPlanner{})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	out, errOut, _ := conformance(t, "--stage", "planning", "--addr", srv.Addr())
	out = strings.ReplaceAll(out+errOut, srv.Addr(), exampleAddr)
	if !strings.HasPrefix(out, "planning at "+exampleAddr+"\n"+rows) {
		t.Errorf("the README's rows:\n%s\nare not the first rows printed:\n%s", rows, out)
	}
	if !strings.HasSuffix(out, tail) {
		t.Errorf("the README's summary and error:\n%s\nare not the last lines printed:\n%s", tail, out)
	}
	cases, err := stagetest.Cases("planning")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("own planning stage passes all %d,", len(cases)); !strings.Contains(
		strings.Join(strings.Fields(after), " "), want) {
		t.Errorf("the README's note after the example does not say %q", want)
	}
}

// TestConformanceBrokenOrchestrator: a public API that answers GetRun of a run that never
// existed with a result, and a blank message with a successful run, fails the orchestrator's
// kit (named by its alias, agent): exit 1, FAIL rows saying how; the RPCs it does not implement
// fail too.
func TestConformanceBrokenOrchestrator(t *testing.T) {
	srv := server.New(server.Options{Name: "orchestrator", Addr: "127.0.0.1:0"})
	agentv1.RegisterAgentServiceServer(srv.GRPC(), brokenAgent{})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })

	out, errOut, code := conformance(t, "--stage", "agent", "--addr", srv.Addr())
	if code != exitcode.Failed {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	got := verdicts(out)
	for name, want := range map[string]string{
		"health":          "PASS",
		"empty-input":     "FAIL ended OUTCOME_COMPLETED_CHAT_ONLY /  success=true, want OUTCOME_FAILED_PREFLIGHT / EMPTY_INPUT success=false",
		"get-unknown-run": "FAIL answered OK, want NotFound with StageError NOT_FOUND",
		"run-id-taken":    "FAIL answered OK, want AlreadyExists with StageError ALREADY_EXISTS",
		"idempotency-key": "FAIL the run has no run_id",
		"lists-builtins":  "FAIL answered Unimplemented",
	} {
		if !strings.HasPrefix(got[name], want) {
			t.Errorf("case %s: %q, want %q...", name, got[name], want)
		}
	}
	if !strings.HasPrefix(out, "orchestrator at "+srv.Addr()+"\n") || !strings.Contains(errOut, "orchestrator (") {
		t.Errorf("the report does not name the orchestrator:\n%s%s", out, errOut)
	}
}

// TestConformanceUsage: unknown stages and missing flags are exit 4, as is --provider-addr for
// a stage other than generation (it would add no case); an address where nothing listens is
// exit 3; --list prints the cases without calling anything, --help the flags.
func TestConformanceUsage(t *testing.T) {
	isolate(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, exitcode.Invalid, "conformance takes --stage"},
		{[]string{"--stage", "nope", "--addr", "127.0.0.1:1"}, exitcode.Invalid, `unknown stage "nope"`},
		{[]string{"--stage", "all", "--addr", "127.0.0.1:1"}, exitcode.Invalid, "--stage all checks every stage"},
		{[]string{"--stage", "planning", "--addr", grpctest.FreeAddr(t)}, exitcode.Unavailable, "nothing answers for planning at"},
		{[]string{"--stage", "planning", "--list"}, exitcode.OK, "cyclic-proposed-plan"},
		{[]string{"--stage", "planning", "--addr", "127.0.0.1:1", "--provider-addr", "127.0.0.1:2"},
			exitcode.Invalid, "--provider-addr checks a generation stage"},
		{[]string{"--stage", "agent", "--list", "--provider-addr", "127.0.0.1:2"},
			exitcode.Invalid, "--provider-addr checks a generation stage"},
		{[]string{"--help"}, exitcode.OK, "usage of agentmesh conformance"},
	} {
		out, errOut, code := conformance(t, tc.args...)
		if code != tc.code || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q\n%s%s", tc.args, code, tc.code, tc.want, out, errOut)
		}
	}
}

// brokenPlanner is a planning stage outside its contract: it answers every request with a
// cyclic plan whose first step uses a tool it was not offered.
type brokenPlanner struct {
	planningv1.UnimplementedPlanningServiceServer
}

func (brokenPlanner) Plan(context.Context, *planningv1.PlanRequest) (*planningv1.PlanResponse, error) {
	return &planningv1.PlanResponse{Steps: []*typev1.Step{
		{Id: "a", Description: "wipe", ToolName: "rm_everything", DependsOn: []string{"b"}},
		{Id: "b", Description: "again", DependsOn: []string{"a"}},
	}, EstimatedSteps: 2, Source: "rules"}, nil
}

// brokenAgent is a public API outside its contract: every run succeeds at once, a blank
// message too, and GetRun answers a result for any run id.
type brokenAgent struct {
	agentv1.UnimplementedAgentServiceServer
}

func (brokenAgent) Run(_ context.Context, req *agentv1.RunRequest) (*typev1.RunResult, error) {
	return &typev1.RunResult{RunId: req.GetRunId(), Outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, Success: true,
		FinalReport: &typev1.FinalReport{Content: "done", Status: typev1.ReportStatus_REPORT_STATUS_SUCCESS}}, nil
}

func (brokenAgent) GetRun(_ context.Context, req *agentv1.GetRunRequest) (*typev1.RunResult, error) {
	return &typev1.RunResult{RunId: req.GetRunId(), Outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, Success: true}, nil
}
