package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The examples in Python (issue 14): a planning stage (examples/python-planning) that takes the
// Go one's place in a mesh of the real binaries, and a client of the public API
// (examples/python-client). They need what the examples' READMEs install: python3 with Debian's
// python3-grpcio and python3-protobuf, and protoc with grpc_python_plugin and the well-known
// types (protobuf-compiler, protobuf-compiler-grpc, libprotobuf-dev). Where those are missing
// the test is skipped, except in CI (CI set), which installs them (.ci/run) and must run it.

// pythonStepPrefix starts the id of every step the Python planning stage makes.
const pythonStepPrefix = "py-"

// TestPythonPlanningStage generates the Python code from proto/ with the example's generate.sh,
// starts the Python planning stage as a process of its own, runs the conformance kit against
// it, starts the mesh's other binaries with PLANNING_ADDR pointing at it, makes a real run
// whose plan the Python stage made, and runs the Python client example (Run, StreamRun and a
// StageError read back) against the orchestrator.
func TestPythonPlanningStage(t *testing.T) {
	ex := setUpPython(t)
	stage := meshproc.External(t, "python-planning", ex.python, []string{ex.server}, ex.env(), nil)

	t.Run("conformance", func(t *testing.T) {
		if out, errOut, code := conformance(t, "--stage", "planning", "--addr", stage.Addr()); code != exitcode.OK {
			t.Errorf("agentmesh conformance --stage planning: exit %d\n%s%s", code, out, errOut)
		}
	})
	t.Run("stage_errors", func(t *testing.T) { checkPythonStageErrors(t, planningv1.NewPlanningServiceClient(stage.Conn())) })

	m := meshproc.Start(t, meshproc.Options{Replicas: []string{"a"}, Replaced: map[string]string{"planning": stage.Addr()}})
	orchestrator := m.Replica(t, "a")

	t.Run("run", func(t *testing.T) { runPlannedInPython(t, m, orchestrator) })

	t.Run("client", func(t *testing.T) {
		got := runPythonClient(t, ex.python, ex.gen, filepath.Join(ex.examples, "python-client", "client.py"), orchestrator.Addr(), "What is 6 times 7?")
		if got.Outcome != "OUTCOME_COMPLETED_WITH_TOOLS" || got.ExitReason != "COMPLETED" || !strings.Contains(got.Answer, "42") {
			t.Errorf("Run: %s %s %q", got.Outcome, got.ExitReason, got.Answer)
		}
		if n := len(got.Events); n < 3 || got.Events[0].Kind != "run_started" || got.Events[n-1].Kind != "run_finished" {
			t.Fatalf("StreamRun events %+v", got.Events)
		}
		i := slices.IndexFunc(got.Events, func(ev clientEvent) bool { return ev.Kind == "plan_created" })
		if i < 0 || len(got.Events[i].Steps) == 0 || !strings.HasPrefix(got.Events[i].Steps[0].ID, pythonStepPrefix) {
			t.Errorf("StreamRun's plan is not the Python stage's: %+v", got.Events)
		}
		if got.Invalid == nil || got.Invalid.Code != "INVALID_ARGUMENT" || got.Invalid.StageError != "STAGE_ERROR_CODE_INVALID_INPUT" || !strings.Contains(got.Invalid.Message, "run_id") {
			t.Errorf("GetRun without a run_id: %+v, want INVALID_ARGUMENT with a StageError INVALID_INPUT naming run_id", got.Invalid)
		}
	})
}

// TestPythonClientWithAnAPIKey: the Python client example sends AGENTMESH_API_KEY, as its
// README says, to a mesh that requires keys, and its runs are the key's principal's. It sent
// user_id "python-client" with the key, which the orchestrator refuses for any principal but
// an admin (PERMISSION_DENIED).
func TestPythonClientWithAnAPIKey(t *testing.T) {
	ex := setUpPython(t)
	key, hash := auth.NewKey()
	cfg := config.Default()
	cfg.Auth.APIKeys = []config.APIKey{{Hash: hash, Tenant: "acme", User: "alice"}}
	m, err := mesh.Start(t.Context(), mesh.Options{Config: cfg, Ephemeral: true, StoreDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	t.Setenv("AGENTMESH_API_KEY", key)
	got := runPythonClient(t, ex.python, ex.gen, filepath.Join(ex.examples, "python-client", "client.py"), m.Addr(mesh.Orchestrator), "What is 6 times 7?")
	if got.Outcome != "OUTCOME_COMPLETED_WITH_TOOLS" || !strings.Contains(got.Answer, "42") {
		t.Errorf("Run with an API key: %s %s %q", got.Outcome, got.ExitReason, got.Answer)
	}
}

// TestPythonClientKeepsItsKeyOffTheNetwork: the Python client, like the CLI, refuses to send
// AGENTMESH_API_KEY in clear text to an address of another host, where anyone on the path
// would read it, and says how to speak TLS (AGENTMESH_CA) or to send it all the same
// (AGENTMESH_INSECURE=1). It sent the key over a plaintext channel to any address. The
// address is TEST-NET-1's (RFC 5737), which no machine answers: the client must refuse before
// it connects.
func TestPythonClientKeepsItsKeyOffTheNetwork(t *testing.T) {
	ex := setUpPython(t)
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	client := filepath.Join(ex.examples, "python-client", "client.py")
	cmd := exec.CommandContext(ctx, ex.python, client, "192.0.2.1:8443", "What is 6 times 7?")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+ex.gen, "PYTHONDONTWRITEBYTECODE=1",
		"AGENTMESH_API_KEY=am_secret", "AGENTMESH_CA=", "AGENTMESH_INSECURE=")
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("the client with a key and no CA for 192.0.2.1: %v, %s", err, out)
	}
	for _, want := range []string{
		"AGENTMESH_API_KEY", "clear text", "AGENTMESH_CA", "AGENTMESH_INSECURE=1",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the client's refusal %q does not say %q", out, want)
		}
	}
	if strings.Contains(string(out), "am_secret") {
		t.Errorf("the client's refusal %q shows the key", out)
	}
}

// TestPythonPlanningStageMutualTLS: the Python planning stage serves mutual TLS with the mesh CA
// and its own certificate (TLS_CA, TLS_CERT, TLS_KEY) as the Go stages do. It refuses a caller
// of the mesh CA whose certificate names no mesh identity (PERMISSION_DENIED with a StageError),
// passes the conformance kit called as the orchestrator, and plans a real run of a mesh whose
// services all talk mutual TLS; with only some of the three files named it does not start.
func TestPythonPlanningStageMutualTLS(t *testing.T) {
	ex := setUpPython(t)
	pki := meshproc.NewPKI(t, t.TempDir())
	own := pki.Issue(t, "planning", certs.Service("planning"))
	tlsEnv := []string{"TLS_CA=" + pki.CAFile(), "TLS_CERT=" + own.Cert, "TLS_KEY=" + own.Key}

	t.Run("partial", func(t *testing.T) {
		cmd := exec.CommandContext(t.Context(), ex.python, ex.server)
		cmd.Env = append(ex.env(), "LISTEN_ADDR=127.0.0.1:0", tlsEnv[0])
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "mutual TLS needs TLS_CA, TLS_CERT, TLS_KEY: TLS_CERT, TLS_KEY not set") {
			t.Fatalf("server.py with TLS_CA alone: %v, want an exit naming the missing files\n%s", err, out)
		}
	})

	// The harness's certificate is the mesh CA's, of no mesh identity: health only.
	harness := pki.Client(t, pki.Issue(t, "python-harness", certs.Subject{CommonName: "python-harness", Client: true}))
	stage := meshproc.External(t, "python-planning", ex.python, []string{ex.server}, append(ex.env(), tlsEnv...), harness)
	if !strings.Contains(stage.Logs(), "mutual TLS") {
		t.Errorf("the stage does not say it serves mutual TLS:\n%s", stage.Logs())
	}

	t.Run("no mesh identity", func(t *testing.T) {
		_, err := planningv1.NewPlanningServiceClient(stage.Conn()).Plan(t.Context(), &planningv1.PlanRequest{Goal: "add 1 and 2"})
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("Plan from a certificate of no mesh identity: %v, want PERMISSION_DENIED", err)
		}
		if got := stageerr.FromError(err); got.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED || got.Stage != "planning" ||
			!strings.Contains(got.Msg, `the certificate of "CN=python-harness" names no mesh identity`) {
			t.Errorf("StageError %s (stage %q) %q, want PERMISSION_DENIED from the planning stage naming the certificate", stageerr.CodeName(got.Code), got.Stage, got.Msg)
		}
	})

	t.Run("conformance", func(t *testing.T) {
		kit := pki.Issue(t, "kit", certs.Service(meshproc.Orchestrator)) // the orchestrator's mesh identity
		t.Setenv("TLS_CA", pki.CAFile())
		t.Setenv("TLS_CERT", kit.Cert)
		t.Setenv("TLS_KEY", kit.Key)
		if out, errOut, code := conformance(t, "--stage", "planning", "--addr", stage.Addr()); code != exitcode.OK {
			t.Errorf("agentmesh conformance --stage planning over mutual TLS: exit %d\n%s%s", code, out, errOut)
		}
	})

	t.Run("run", func(t *testing.T) {
		m := meshproc.Start(t, meshproc.Options{MTLS: true, PKI: pki, Replicas: []string{"a"}, Replaced: map[string]string{"planning": stage.Addr()}})
		runPlannedInPython(t, m, m.Replica(t, "a"))
	})
}

// runPlannedInPython makes a real run through orchestrator, a replica of m, whose planning stage
// is the Python one: the run completes with its tools, and its plan is the Python stage's.
func runPlannedInPython(t *testing.T, m *meshproc.Mesh, orchestrator *meshproc.Service) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	res, err := orchestrator.Agent().Run(ctx, &agentv1.RunRequest{UserId: "python-test", Message: "What is 6 times 7?"})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS || !strings.Contains(res.GetFinalReport().GetContent(), "42") {
		t.Fatalf("run %s ended %s %s: %q", res.GetRunId(), res.GetOutcome(), res.GetExitReason(), res.GetFinalReport().GetContent())
	}
	evs := m.StoredEvents(t, res.GetRunId())
	i := slices.IndexFunc(evs, func(ev *eventv1.RunEvent) bool { return ev.GetPlanCreated() != nil })
	if i < 0 {
		t.Fatal("the run has no plan_created event")
	}
	plan := evs[i].GetPlanCreated()
	if len(plan.GetSteps()) == 0 || !strings.HasPrefix(plan.GetSteps()[0].GetId(), pythonStepPrefix) || plan.GetSource() != "rules" {
		t.Errorf("the run's plan is not the Python stage's (steps %s…): %v", pythonStepPrefix, plan)
	}
}

// pythonExamples is what the tests of the Python examples run: a python3 with gRPC, and the
// examples' folder and generated code.
type pythonExamples struct {
	python   string // the interpreter
	examples string // the examples' folder
	gen      string // the code generated from proto/
	planning string // the planning stage's folder
	server   string // the planning stage's server.py
}

// setUpPython skips t in short mode, isolates it, finds python3 and generates the Python code.
func setUpPython(t *testing.T) pythonExamples {
	t.Helper()
	if testing.Short() {
		t.Skip("starts agentmesh and a Python stage as separate processes")
	}
	examples, err := filepath.Abs(filepath.Join("..", "..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	isolate(t)
	ex := pythonExamples{python: findPython(t), examples: examples, planning: filepath.Join(examples, "python-planning")}
	ex.gen = generatePython(t, filepath.Join(ex.planning, "generate.sh"))
	ex.server = filepath.Join(ex.planning, "server.py")
	return ex
}

// env is the environment of the Python planning stage: the test's own, without the files of
// mutual TLS, and the generated code.
func (ex pythonExamples) env() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "TLS_CA=") || strings.HasPrefix(kv, "TLS_CERT=") || strings.HasPrefix(kv, "TLS_KEY=")
	})
	return append(env, "PYTHONPATH="+ex.gen+string(os.PathListSeparator)+ex.planning, "PYTHONDONTWRITEBYTECODE=1")
}

// checkPythonStageErrors checks that the Python stage's failures reach a Go client as the Go
// stages send them: the gRPC code, and the StageError detail that pkg/stageerr reads from the
// trailer the Python stage encodes by hand.
func checkPythonStageErrors(t *testing.T, planning planningv1.PlanningServiceClient) {
	tools := []*typev1.Tool{{Name: "calculator", Description: "Evaluates an arithmetic expression."}}
	step := func(id, tool string, deps ...string) *typev1.Step {
		return &typev1.Step{Id: id, Description: "step " + id, ToolName: tool, DependsOn: deps}
	}
	for _, tc := range []struct {
		name string
		req  *planningv1.PlanRequest
		code codes.Code
		want typev1.StageErrorCode
	}{
		{"empty goal", &planningv1.PlanRequest{Goal: " "}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT},
		{"negative max_steps", &planningv1.PlanRequest{Goal: "add 1 and 2", MaxSteps: -1}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT},
		{"cycle", &planningv1.PlanRequest{Goal: "g", AvailableTools: tools, ProposedSteps: []*typev1.Step{step("a", "", "b"), step("b", "", "a")}},
			codes.FailedPrecondition, typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN},
		{"unknown tool", &planningv1.PlanRequest{Goal: "g", AvailableTools: tools, ProposedSteps: []*typev1.Step{step("a", "web_search")}},
			codes.FailedPrecondition, typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN},
		{"too many steps", &planningv1.PlanRequest{Goal: "add 1 and 2; then double it; then halve it", MaxSteps: 2},
			codes.ResourceExhausted, typev1.StageErrorCode_STAGE_ERROR_CODE_PLAN_TOO_COMPLEX},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := planning.Plan(t.Context(), tc.req)
			if status.Code(err) != tc.code {
				t.Fatalf("Plan: %v, want %s", err, tc.code)
			}
			if got := stageerr.FromError(err); got.Code != tc.want || got.Stage != "planning" || got.Msg != status.Convert(err).Message() {
				t.Errorf("StageError %s (stage %q) %q, want %s from the planning stage", stageerr.CodeName(got.Code), got.Stage, got.Msg, stageerr.CodeName(tc.want))
			}
		})
	}
	resp, err := planning.Plan(t.Context(), &planningv1.PlanRequest{Goal: "compute 6 times 7, then explain the result", AvailableTools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetSteps(); len(got) != 2 || got[0].GetToolName() != "calculator" || !slices.Equal(got[1].GetDependsOn(), []string{got[0].GetId()}) {
		t.Errorf("plan %v, want a calculator step and one that depends on it", got)
	}
}

// clientEvent is an event of StreamRun as the Python client prints it.
type clientEvent struct {
	Seq   int    `json:"seq"`
	Kind  string `json:"kind"`
	Steps []struct {
		ID string `json:"id"`
	} `json:"steps"`
}

// clientOutput is what the Python client prints.
type clientOutput struct {
	RunID      string        `json:"run_id"`
	Outcome    string        `json:"outcome"`
	ExitReason string        `json:"exit_reason"`
	Answer     string        `json:"answer"`
	Events     []clientEvent `json:"events"`
	Invalid    *struct {
		Code       string `json:"code"`
		Message    string `json:"message"`
		StageError string `json:"stage_error"`
	} `json:"invalid"`
}

// runPythonClient runs the Python client example, with the generated code of gen, against the
// orchestrator at addr.
func runPythonClient(t *testing.T, python, gen, client, addr, message string) clientOutput {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, client, addr, message)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+gen, "PYTHONDONTWRITEBYTECODE=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python client: %v\n%s", err, stderr.String())
	}
	var got clientOutput
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("python client output %q: %v", out, err)
	}
	return got
}

// findPython returns a python3 that imports grpc and google.protobuf: $PYTHON when set, else
// python3 on PATH, else Debian's /usr/bin/python3 (where python3-grpcio installs, when PATH
// finds another python3 first).
func findPython(t *testing.T) string {
	t.Helper()
	candidates := []string{"python3", "/usr/bin/python3"}
	if p := os.Getenv("PYTHON"); p != "" {
		candidates = []string{p}
	}
	for _, c := range candidates {
		path, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		if exec.CommandContext(t.Context(), path, "-c", "import grpc, google.protobuf").Run() == nil {
			return path
		}
	}
	missing(t, "no python3 with the grpc and protobuf modules (Debian: apt-get install python3-grpcio python3-protobuf)")
	return ""
}

// generatePython runs the examples' generation script into a temporary directory and returns
// it.
func generatePython(t *testing.T, script string) string {
	t.Helper()
	for _, tool := range []string{"protoc", "grpc_python_plugin"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing(t, tool+" is not installed (Debian: apt-get install protobuf-compiler libprotobuf-dev protobuf-compiler-grpc)")
		}
	}
	out := t.TempDir()
	b, err := exec.CommandContext(t.Context(), script, out).CombinedOutput()
	switch {
	case err != nil && bytes.Contains(b, []byte("google/protobuf/")) && bytes.Contains(b, []byte("not found")):
		missing(t, "protoc has no well-known types (Debian: apt-get install libprotobuf-dev)")
	case err != nil:
		t.Fatalf("generate.sh: %v\n%s", err, b)
	}
	return out
}

// missing skips t for a missing dependency, or fails it in CI, which installs the dependency.
func missing(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s; CI installs it (.ci/run) and must run this test", why)
	}
	t.Skip(why)
}
