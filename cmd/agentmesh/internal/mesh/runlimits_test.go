package mesh_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestRunLimitsBoundEveryRun: an operator's run_limits bound what a request's overrides may
// ask for (budgets, timeouts, the models its attempts go to), naming the field and its
// ceiling, a budget the defaults leave unlimited takes its ceiling, and a run within them
// runs.
func TestRunLimitsBoundEveryRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentmesh.yaml")
	const limits = "run_limits: {max_turns: 5, max_tokens_consumed: 100000, total_timeout_ms: 120000,\n" +
		"  targets: [{provider: rules, model: rules-v1}]}\n" +
		"defaults: {max_turns: 4, total_timeout_ms: 60000}\n"
	if err := os.WriteFile(path, []byte(limits), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadLayers([]config.Layer{{Name: "test", Path: path, Required: true}})
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, cfg)

	for _, tc := range []struct {
		name      string
		overrides *agentv1.RunOverrides
		want      string
	}{
		{"more turns", &agentv1.RunOverrides{MaxTurns: i32(6)},
			"overrides.max_turns must be at most 5 (run_limits.max_turns), got 6"},
		{"no token budget", &agentv1.RunOverrides{MaxTokensConsumed: i64(0)},
			"overrides.max_tokens_consumed must not be 0 (no limit) under " +
				"run_limits.max_tokens_consumed: at most 100000"},
		{"a longer run", &agentv1.RunOverrides{TotalTimeoutMs: i64(120_001)},
			"overrides.total_timeout_ms must be at most 120000 (run_limits.total_timeout_ms), " +
				"got 120001"},
		{"another model", &agentv1.RunOverrides{Targets: []*typev1.Target{
			{Provider: "rules", Model: "rules-v1"}, {Provider: "rules", Model: "rules-max"}}},
			"overrides.targets[1]: rules/rules-max is not one of run_limits.targets " +
				"(rules/rules-v1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "What is 6 times 7?",
				Overrides: tc.overrides})
			if status.Code(err) != codes.InvalidArgument ||
				!strings.Contains(status.Convert(err).Message(), tc.want) {
				t.Fatalf("err = %v, want INVALID_ARGUMENT mentioning %q", err, tc.want)
			}
		})
	}

	res := h.run(t, &agentv1.RunRequest{Message: "What is 6 times 7?"})
	if c := res.GetContract(); !res.GetSuccess() || c.GetMaxTokensConsumed() != 100000 ||
		c.GetMaxTurns() != 4 || c.GetTotalTimeoutMs() != 60000 {
		t.Errorf("a run without overrides: success %v, contract %v; want the defaults, the token "+
			"budget at its ceiling", res.GetSuccess(), c)
	}
	res = h.run(t, &agentv1.RunRequest{Message: "What is 6 times 7?", Overrides: &agentv1.RunOverrides{
		MaxTurns: i32(5), MaxTokensConsumed: i64(100000), TotalTimeoutMs: i64(120_000)}})
	if c := res.GetContract(); !res.GetSuccess() || c.GetMaxTurns() != 5 ||
		c.GetTotalTimeoutMs() != 120_000 {
		t.Errorf("a run at the ceilings: success %v, contract %v", res.GetSuccess(), c)
	}
}

// TestARunMayNotOutliveItsEvents: a request whose total_timeout_ms is longer than the event
// stream keeps events (nats.stream_max_age_ms) is INVALID_ARGUMENT naming both, and one that
// ends in time runs. Before, a run paused up to 30 days lost its first events at 7 days (the
// default), and a watch of it began mid-run.
func TestARunMayNotOutliveItsEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentmesh.yaml")
	const kept = "nats: {stream_max_age_ms: 3600000}\n"
	if err := os.WriteFile(path, []byte(kept), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadLayers([]config.Layer{{Name: "test", Path: path, Required: true}})
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, cfg)
	_, err = h.client.Run(t.Context(), &agentv1.RunRequest{Message: "What is 6 times 7?",
		Overrides: &agentv1.RunOverrides{TotalTimeoutMs: i64(3_600_001)}})
	const want = "overrides.total_timeout_ms must be at most 3600000 (nats.stream_max_age_ms: " +
		"the event stream keeps a run's events no longer), got 3600001"
	if status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(status.Convert(err).Message(), want) {
		t.Fatalf("err = %v, want INVALID_ARGUMENT mentioning %q", err, want)
	}
	res := h.run(t, &agentv1.RunRequest{Message: "What is 6 times 7?",
		Overrides: &agentv1.RunOverrides{TotalTimeoutMs: i64(3_600_000)}})
	if !res.GetSuccess() || res.GetContract().GetTotalTimeoutMs() != 3_600_000 {
		t.Errorf("a run that ends as its events expire: success %v, contract %v",
			res.GetSuccess(), res.GetContract())
	}
}
