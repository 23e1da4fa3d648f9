package generation_test

import (
	"log/slog"
	"strings"
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/logtest"
)

// TestToolArgumentsStayOutOfTheLogs: a tool call whose arguments needed repair, or were
// rejected, is logged with its id, tool, repairs and size, never its arguments: they carry
// what the model put in them (a password it was told, a file's whole content), and a log line
// held them whole, of any size, wherever the stage's logs go.
func TestToolArgumentsStayOutOfTheLogs(t *testing.T) {
	const secret = "hunter2-do-not-log"
	var logs logtest.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	for _, tc := range []struct {
		name   string
		raw    string
		strict bool
		status generationv1.AdapterStatus
	}{
		{"repaired", `{"password": "` + secret + `",}`, false, generationv1.AdapterStatus_ADAPTER_STATUS_RECOVERED},
		{"rejected", `{"password": "` + secret + `",}`, true, generationv1.AdapterStatus_ADAPTER_STATUS_REJECTED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{
				ToolCalls: []llmtest.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: tc.raw}},
			}}})
			before := len(logs.String())
			req := request("openai", "gpt-test", user("weather?"))
			req.Tools = tools("get_weather")
			req.StrictMode = tc.strict
			resp, err := openAIClient(t, srv, nil).Generate(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetAdapterStatus() != tc.status {
				t.Fatalf("status %v, want %v", resp.GetAdapterStatus(), tc.status)
			}
			out := logs.String()[before:]
			if !strings.Contains(out, `"call_id":"call_1"`) {
				t.Fatalf("no log line of the call: %s", out)
			}
			if strings.Contains(out, secret) {
				t.Errorf("the logs hold the call's arguments: %s", out)
			}
		})
	}
}
