package stagetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// CaseTimeout bounds each case: a stage that does not answer in time fails the case.
const CaseTimeout = 15 * time.Second

// ErrUnreachable is returned by Run when nothing answers at the connection's address.
var ErrUnreachable = errors.New("stage unreachable")

// Result is the outcome of one case.
type Result struct {
	// Case names the case, e.g. "cyclic-proposed-plan".
	Case string
	// Pass says whether the stage kept the contract.
	Pass bool
	// Reason is what the case requires when it passed, and how the stage broke it when it
	// failed.
	Reason string
}

// Report is the outcome of a stage's table.
type Report struct {
	// Stage is the stage the table is of.
	Stage string
	// Results has one entry per case, in table order.
	Results []Result
}

// Passed reports whether every case passed.
func (r Report) Passed() bool {
	return !slices.ContainsFunc(r.Results, func(res Result) bool { return !res.Pass })
}

// Failed counts the cases that failed.
func (r Report) Failed() int {
	n := 0
	for _, res := range r.Results {
		if !res.Pass {
			n++
		}
	}
	return n
}

// testCase is one row of a stage's table: what the contract requires, and the check that
// sends the request and returns how the answer breaks it (nil when it keeps it).
type testCase struct {
	name     string
	requires string
	check    func(ctx context.Context, k *kit) error
}

// kit is what a case's check works with: the connection, and a token unique to this run of
// the kit for the identifiers the cases write.
type kit struct {
	conn  *grpc.ClientConn
	token string
}

// id returns an identifier unique to this run of the kit, e.g. "stagetest-run-1a2b3c4d".
func (k *kit) id(kind string) string { return "stagetest-" + kind + "-" + k.token }

// stage is a stage's table: its gRPC service, for the health check, and its cases.
type stage struct {
	service string
	cases   []testCase
}

// stages are the tables, by stage name.
var stages = map[string]stage{
	"intent":       {"agentmesh.intent.v1.IntentService", intentCases},
	"planning":     {"agentmesh.planning.v1.PlanningService", planningCases},
	"context":      {"agentmesh.context.v1.ContextService", contextCases},
	"generation":   {"agentmesh.generation.v1.GenerationService", generationCases},
	"action":       {"agentmesh.action.v1.ActionService", actionCases},
	"observation":  {"agentmesh.observation.v1.ObservationService", observationCases},
	"memory":       {"agentmesh.memory.v1.MemoryService", memoryCases},
	"recovery":     {"agentmesh.recovery.v1.RecoveryService", recoveryCases},
	"orchestrator": {"agentmesh.agent.v1.AgentService", orchestratorCases},
}

// tableOf is the cases of stage s (named name) as opts has them: the generation table's
// provider cases only with a provider address.
func tableOf(name string, s stage, opts Options) []testCase {
	if name != "generation" || opts.ProviderAddr == "" {
		return s.cases
	}
	return slices.Concat(s.cases, providerCases())
}

// aliases are other names of stages: "agent", after the public API's package, is the
// orchestrator.
var aliases = map[string]string{"agent": "orchestrator"}

// lookup returns the canonical name and the table of stage name or of one of its aliases.
func lookup(name string) (string, stage, error) {
	if canonical, ok := aliases[name]; ok {
		name = canonical
	}
	s, ok := stages[name]
	if !ok {
		return "", stage{}, unknownStage(name)
	}
	return name, s, nil
}

// Stages returns the names of the stages the kit has a table for: the eight stages in the
// order of the agent loop, then the orchestrator, whose table is the public API's
// (agentmesh.agent.v1.AgentService; "agent" names it too).
func Stages() []string {
	return []string{"intent", "planning", "context", "generation", "action", "observation", "memory", "recovery", "orchestrator"}
}

// Name returns the name in Stages of stage name, which may be an alias ("agent" is
// "orchestrator"); an unknown stage is an error naming the stages there are.
func Name(name string) (string, error) {
	canonical, _, err := lookup(name)
	return canonical, err
}

// Cases returns the names of a stage's cases with what each requires, in table order.
func Cases(name string) ([]Result, error) { return CasesWith(name, Options{}) }

// CasesWith is Cases for a run of the kit with opts (RunWith).
func CasesWith(name string, opts Options) ([]Result, error) {
	name, s, err := lookup(name)
	if err != nil {
		return nil, err
	}
	out := []Result{{Case: "health", Reason: healthRequires(s.service)}}
	for _, c := range tableOf(name, s, opts) {
		out = append(out, Result{Case: c.name, Reason: c.requires})
	}
	return out, nil
}

// Run runs the table of stage name against the stage conn reaches and reports every case. The
// first case asks the gRPC health service; when nothing answers there (UNAVAILABLE), Run
// returns ErrUnreachable instead of a report. An unknown stage name is an error too. The
// report names the stage by its name in Stages, also when name is an alias.
func Run(ctx context.Context, name string, conn *grpc.ClientConn) (Report, error) {
	return RunWith(ctx, name, conn, Options{})
}

// RunWith is Run with the cases opts adds: with Options.ProviderAddr, the generation table's
// cases of its provider's failures, for which it serves a scripted provider there while it
// runs.
func RunWith(ctx context.Context, name string, conn *grpc.ClientConn, opts Options) (Report, error) {
	name, s, err := lookup(name)
	if err != nil {
		return Report{}, err
	}
	report := Report{Stage: name}
	health := Result{Case: "health", Reason: healthRequires(s.service), Pass: true}
	if err := checkHealth(ctx, conn, s.service); err != nil {
		if status.Code(err) == codes.Unavailable {
			return Report{}, fmt.Errorf("%w: %s: %s", ErrUnreachable, conn.Target(), status.Convert(err).Message())
		}
		health.Pass, health.Reason = false, err.Error()
	}
	report.Results = append(report.Results, health)
	cases := tableOf(name, s, opts)
	if len(cases) > len(s.cases) {
		stop, err := serveProvider(opts.ProviderAddr)
		if err != nil {
			return Report{}, err
		}
		defer stop()
	}
	k := &kit{conn: conn, token: uuid.NewString()[:8]}
	for _, c := range cases {
		res := Result{Case: c.name, Pass: true, Reason: c.requires}
		cctx, cancel := context.WithTimeout(ctx, CaseTimeout)
		err := c.check(cctx, k)
		cancel()
		if err != nil {
			res.Pass, res.Reason = false, err.Error()
		}
		report.Results = append(report.Results, res)
	}
	return report, nil
}

func unknownStage(name string) error {
	return fmt.Errorf("unknown stage %q (want one of %s)", name, strings.Join(Stages(), ", "))
}

func healthRequires(service string) string {
	return "grpc.health.v1 reports " + service + " SERVING"
}

// checkHealth asks the health service about service. An UNAVAILABLE status is returned as it
// is, so Run can tell an unreachable address from a stage without a health service.
func checkHealth(ctx context.Context, conn *grpc.ClientConn, service string) error {
	ctx, cancel := context.WithTimeout(ctx, CaseTimeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	switch {
	case status.Code(err) == codes.Unavailable:
		return err
	case err != nil:
		return fmt.Errorf("health check of %s: %s: %s", service, status.Code(err), status.Convert(err).Message())
	case resp.GetStatus() != healthpb.HealthCheckResponse_SERVING:
		return fmt.Errorf("health check of %s answered %s, want SERVING", service, resp.GetStatus())
	}
	return nil
}
