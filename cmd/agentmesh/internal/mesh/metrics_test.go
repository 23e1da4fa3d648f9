package mesh_test

import (
	"math"
	"strings"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/metricstest"
)

// metrics scrapes the mesh's metrics listener.
func (h *harness) metrics(t *testing.T) metricstest.Families {
	t.Helper()
	return metricstest.Scrape(t, h.mesh.MetricsAddr())
}

// TestRunMetrics (issue 14.3): a run with a tool call shows in the Prometheus metrics as the
// run's accounting has it: runs and provider calls in flight while it runs, then its outcome
// and turns, the tokens and cost of its provider and model, the provider calls' durations
// (the rate-limited one with its error type) and the rate-limit headroom of the provider's
// last answer, the tool's execution by tool, its queue's depth and wait, and the RPCs of the
// stages it went through, by method.
func TestRunMetrics(t *testing.T) {
	cfg := config.Default()
	hold := make(chan struct{})
	h := startWith(t, cfg, func(cfg *config.Config, _ string) {
		p := cfg.Providers["scripted"]
		p.Models = map[string]config.Model{"gpt-test": {Pricing: &config.Pricing{Input: 2, Output: 8}}}
		cfg.Providers["scripted"] = p
	}, llmtest.Scenario{Name: "tool", Match: "What is 6 times 7?", Turns: []llmtest.Turn{
		{FailuresBeforeSuccess: 1, Failure: llmtest.FailRateLimit, RetryAfterMS: 10,
			ToolCalls: []llmtest.ToolCall{{ID: "call_calc", Name: "calculator", Arguments: `{"expression":"6*7"}`}},
			Usage:     &llmtest.Usage{PromptTokens: 120, CompletionTokens: 15},
			RateLimit: &llmtest.RateLimit{RemainingRequests: 99, RemainingTokens: 90000}},
		{Content: "6 times 7 is 42.", Hold: hold, Usage: &llmtest.Usage{PromptTokens: 200, CompletionTokens: 9},
			RateLimit: &llmtest.RateLimit{RemainingRequests: 98, RemainingTokens: 85000}},
	}})
	type outcome struct {
		res *typev1.RunResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "What is 6 times 7?", UserId: "bob"})
		done <- outcome{res, err}
	}()

	// While the last answer is held, the run and its provider call are in flight.
	var m metricstest.Families
	if !eventually(t, 30*time.Second, func() bool {
		m = h.metrics(t)
		return m.Value("agentmesh_generation_active_requests", nil) == 1
	}) {
		t.Fatalf("agentmesh_generation_active_requests never reached 1 (families %s)", m)
	}
	if got := m.Value("agentmesh_run_active", nil); got != 1 {
		t.Errorf("agentmesh_run_active = %v while the run runs, want 1", got)
	}
	close(hold)
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	res := o.res
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS || res.GetExitReason() != "COMPLETED" {
		t.Fatalf("outcome %s %s (%v)", res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	// The run's goroutine ends, and an RPC is measured when it ends on the server, which may
	// be after the caller has the answer.
	run := metricstest.Labels{"rpc_method": "agentmesh.agent.v1.AgentService/Run"}
	generate := metricstest.Labels{"rpc_method": "agentmesh.generation.v1.GenerationService/Generate"}
	if !eventually(t, 10*time.Second, func() bool {
		m = h.metrics(t)
		return m.Value("agentmesh_run_active", nil) == 0 && m.Value("agentmesh_generation_active_requests", nil) == 0 &&
			m.Count("rpc_server_call_duration_seconds", run) == 1 && m.Count("rpc_server_call_duration_seconds", generate) == 3
	}) {
		t.Errorf("runs in flight %v, provider calls in flight %v, Run RPCs measured %d after the run, want 0, 0 and 1",
			m.Value("agentmesh_run_active", nil), m.Value("agentmesh_generation_active_requests", nil), m.Count("rpc_server_call_duration_seconds", run))
	}

	ended := metricstest.Labels{"agentmesh_run_outcome": "OUTCOME_COMPLETED_WITH_TOOLS", "agentmesh_run_exit_reason": "COMPLETED"}
	if got := m.Value("agentmesh_run_finished_total", ended); got != 1 {
		t.Errorf("agentmesh_run_finished_total%v = %v, want 1 (families %s)", ended, got, m)
	}
	turns := metricstest.Labels{"agentmesh_run_outcome": "OUTCOME_COMPLETED_WITH_TOOLS"}
	if n, sum := m.Count("agentmesh_run_turns", turns), m.Value("agentmesh_run_turns", turns); n != 1 || sum != float64(res.GetTurns()) {
		t.Errorf("agentmesh_run_turns: %d runs, %v turns, want 1 run of %d turns", n, sum, res.GetTurns())
	}

	// Tokens and cost by provider and model, as the run accounted them.
	target := metricstest.Labels{"gen_ai_provider_name": "scripted", "gen_ai_request_model": "gpt-test"}
	with := func(k, v string) metricstest.Labels {
		l := metricstest.Labels{k: v}
		for key, value := range target {
			l[key] = value
		}
		return l
	}
	if got := m.Value("gen_ai_client_token_usage", with("gen_ai_token_type", "input")); got != float64(res.GetUsage().GetInput()) || got != 320 {
		t.Errorf("input tokens %v, want the run's %d (320)", got, res.GetUsage().GetInput())
	}
	if got := m.Value("gen_ai_client_token_usage", with("gen_ai_token_type", "output")); got != float64(res.GetUsage().GetOutput()) || got != 24 {
		t.Errorf("output tokens %v, want the run's %d (24)", got, res.GetUsage().GetOutput())
	}
	var cost float64
	for _, e := range res.GetAccounting() {
		cost += e.GetCostUsd()
	}
	if got := m.Value("agentmesh_generation_cost_usd_total", target); cost == 0 || math.Abs(got-cost) > 1e-12 {
		t.Errorf("cost %v USD, want the run's accounted %v", got, cost)
	}
	if n := m.Count("gen_ai_client_operation_duration_seconds", with("gen_ai_operation_name", "chat")); n != 3 {
		t.Errorf("%d chat calls timed, want 3", n)
	}
	if n := m.Count("gen_ai_client_operation_duration_seconds", with("error_type", "RATE_LIMITED")); n != 1 {
		t.Errorf("%d rate-limited chat calls timed, want 1", n)
	}
	if got := m.Value("agentmesh_generation_rate_limit_remaining_requests", target); got != 98 {
		t.Errorf("remaining requests %v, want 98 (the last answer's)", got)
	}
	if got := m.Value("agentmesh_generation_rate_limit_remaining_tokens", target); got != 85000 {
		t.Errorf("remaining tokens %v, want 85000 (the last answer's)", got)
	}

	// The tool's execution, its queue, and the RPCs.
	calc := metricstest.Labels{"gen_ai_tool_name": "calculator", "agentmesh_tool_status": "success"}
	if n := m.Count("agentmesh_action_tool_duration_seconds", calc); n != 1 {
		t.Errorf("%d calculator executions, want 1", n)
	}
	queue := metricstest.Labels{"queue": "default"}
	if n := m.Count("agentmesh_action_queue_wait_duration_seconds", queue); n != 1 {
		t.Errorf("%d waits on the default queue, want 1", n)
	}
	if len(m.Series("agentmesh_action_queue_depth", queue)) != 1 || m.Value("agentmesh_action_queue_depth", queue) != 0 {
		t.Errorf("default queue depth %v (%d series), want 0", m.Value("agentmesh_action_queue_depth", queue), len(m.Series("agentmesh_action_queue_depth", queue)))
	}
	for method, want := range map[string]uint64{
		"agentmesh.agent.v1.AgentService/Run":                1,
		"agentmesh.action.v1.ActionService/Execute":          1,
		"agentmesh.intent.v1.IntentService/Parse":            1,
		"agentmesh.recovery.v1.RecoveryService/Decide":       1,
		"agentmesh.generation.v1.GenerationService/Generate": 2,
	} {
		if n := m.Count("rpc_server_call_duration_seconds", metricstest.Labels{"rpc_method": method, "rpc_response_status_code": "OK"}); n != want {
			t.Errorf("%d OK %s RPCs, want %d (methods %v)", n, method, want, m.LabelValues("rpc_server_call_duration_seconds", "rpc_method", nil))
		}
	}
	// The callers' side of the same RPCs: the orchestrator's calls to the stages.
	for method, want := range map[string]uint64{
		"agentmesh.action.v1.ActionService/Execute":    1,
		"agentmesh.intent.v1.IntentService/Parse":      1,
		"agentmesh.recovery.v1.RecoveryService/Decide": 1,
		"agentmesh.context.v1.ContextService/Assemble": 2,
	} {
		if n := m.Count("rpc_client_call_duration_seconds", metricstest.Labels{"rpc_method": method, "rpc_response_status_code": "OK"}); n != want {
			t.Errorf("%d OK %s client calls, want %d (methods %v)", n, method, want, m.LabelValues("rpc_client_call_duration_seconds", "rpc_method", nil))
		}
	}
	if v := m.LabelValues("rpc_client_call_duration_seconds", "server_address", nil); len(v) > 0 {
		t.Errorf("rpc_client_call_duration_seconds names the peers' addresses: %v", v)
	}
	if codes := m.LabelValues("rpc_server_call_duration_seconds", "rpc_response_status_code", generate); m.Count("rpc_server_call_duration_seconds", generate) != 3 || len(codes) != 2 {
		t.Errorf("Generate RPCs by status code %v, want the rate-limited one apart from the 2 OK", codes)
	}
	checkScopeLabels(t, m)
	for _, family := range []string{"gen_ai_client_token_usage", "agentmesh_run_finished_total", "agentmesh_action_tool_duration_seconds", "rpc_server_call_duration_seconds", "rpc_client_call_duration_seconds"} {
		for _, label := range []string{"agentmesh_run_id", "run_id", "user_id", "agentmesh_user_id"} {
			if v := m.LabelValues(family, label, nil); len(v) > 0 {
				t.Errorf("%s has a %s label: %v", family, label, v)
			}
		}
	}
}

// checkScopeLabels checks the instrumentation scope labels of the series of the README's table
// of metrics (the rpc_*, gen_ai_* and agentmesh_* families), as "Metrics" describes them:
// each carries otel_scope_name, otel_scope_version and otel_scope_schema_url, the latter two
// empty (which Prometheus stores as absent) for agentmesh's own packages, and naming otelgrpc's
// version and the OpenTelemetry semantic conventions' schema for its rpc_* metrics.
func checkScopeLabels(t *testing.T, m metricstest.Families) {
	t.Helper()
	for name, f := range m {
		if !strings.HasPrefix(name, "rpc_") && !strings.HasPrefix(name, "gen_ai_") && !strings.HasPrefix(name, "agentmesh_") {
			continue
		}
		for _, series := range f.GetMetric() {
			scope := map[string]string{}
			for _, l := range series.GetLabel() {
				if strings.HasPrefix(l.GetName(), "otel_scope_") {
					scope[strings.TrimPrefix(l.GetName(), "otel_scope_")] = l.GetValue()
				}
			}
			own := strings.HasPrefix(scope["name"], "github.com/agentmesh/agentmesh/")
			switch {
			case len(scope) != 3 || scope["name"] == "":
				t.Errorf("%s: scope labels %v, want otel_scope_name, otel_scope_version and otel_scope_schema_url", name, scope)
			case own && (scope["version"] != "" || scope["schema_url"] != ""):
				t.Errorf("%s: scope %v, want no version and no schema URL for agentmesh's own package", name, scope)
			case !own && (!strings.HasSuffix(scope["name"], "/otelgrpc") || scope["version"] == "" || !strings.HasPrefix(scope["schema_url"], "https://opentelemetry.io/schemas/")):
				t.Errorf("%s: scope %v, want otelgrpc's, with its version and schema URL", name, scope)
			}
		}
	}
}
