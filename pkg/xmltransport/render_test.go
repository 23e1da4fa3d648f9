package xmltransport_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/xmltransport"
	"google.golang.org/protobuf/types/known/structpb"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

func weatherTools(t *testing.T) []*typev1.Tool {
	t.Helper()
	schema, err := structpb.NewStruct(map[string]any{
		"type":       "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}},
		"required":   []any{"city"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return []*typev1.Tool{
		{Name: "get_weather", Description: "Current weather of a city.", InputSchema: schema},
		{Name: "current_time"},
	}
}

func TestRenderNext(t *testing.T) {
	tools := weatherTools(t)
	for _, tc := range []struct {
		golden string
		mode   xmltransport.Mode
		opts   xmltransport.NextOptions
		has    []string
		hasNot []string
	}{
		{
			golden: "next_xml.txt", mode: xmltransport.ModeXML,
			opts: xmltransport.NextOptions{Tools: tools, MaxCalls: 3, Format: "markdown"},
			has: []string{
				"Session nonce: 1a2b3c4d.", `<ai-agent-1a2b3c4d-0004 tool="TOOL_NAME">`,
				"1a2b3c4d-0004, 1a2b3c4d-0005, 1a2b3c4d-0006.", `Input schema: {"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}`,
				`<ai-agent-1a2b3c4d-PROGRESS tool="agent__progress_report">`, `<ai-agent-1a2b3c4d-FINAL tool="agent__final_report" format="markdown">`,
			},
		},
		{
			golden: "next_xml_forced_final.txt", mode: xmltransport.ModeXML,
			opts:   xmltransport.NextOptions{Tools: tools, MaxCalls: 3, Format: "json", FormatSchema: `{"type":"object"}`, ForcedFinal: true},
			has:    []string{"This is the final turn", "-PROGRESS", `format="json"`, `{"type":"object"}`},
			hasNot: []string{"get_weather", "-0004", "TOOL_NAME"},
		},
		{
			golden: "next_xml_final.txt", mode: xmltransport.ModeXMLFinal,
			opts:   xmltransport.NextOptions{Tools: tools, MaxCalls: 3},
			has:    []string{`<ai-agent-1a2b3c4d-FINAL tool="agent__final_report" format="text">`},
			hasNot: []string{"get_weather", "-0004", "-PROGRESS"},
		},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			s := &xmltransport.Session{Mode: tc.mode, Nonce: nonce, NextSlot: 4}
			got := s.RenderNext(tc.opts)
			checkGolden(t, tc.golden, got)
			for _, want := range tc.has {
				if !strings.Contains(got, want) {
					t.Errorf("XML-NEXT lacks %q", want)
				}
			}
			for _, bad := range tc.hasNot {
				if strings.Contains(got, bad) {
					t.Errorf("XML-NEXT must not contain %q", bad)
				}
			}
		})
	}
}

// TestRenderedTemplatesParse proves the templates XML-NEXT shows are tags Parse accepts.
func TestRenderedTemplatesParse(t *testing.T) {
	s := &xmltransport.Session{Mode: xmltransport.ModeXML, Nonce: nonce, NextSlot: 4}
	next := s.RenderNext(xmltransport.NextOptions{Tools: weatherTools(t), MaxCalls: 1, Format: "markdown"})
	r := xmltransport.Parse(next, nonce, 4, "stop")
	if len(r.Calls) != 1 || r.Calls[0].Slot != nonce+"-0004" || r.Progress == nil || r.Final == nil ||
		r.Final.Format != "markdown" || r.Final.Payload != "the complete final report" {
		t.Errorf("parsed templates = %+v", r)
	}
}

func TestRenderPast(t *testing.T) {
	got := xmltransport.RenderPast([]xmltransport.ToolResponse{
		{Slot: nonce + "-0001", Tool: "get_weather", Status: "ok", Duration: 1234567 * time.Microsecond, Request: `{"city": "Paris"}`, Response: "Sunny, 21 °C\n"},
		{Slot: nonce + "-0002", Tool: "current_time", Status: "failed", Duration: 30 * time.Second, Request: "{}", Response: "(tool failed: timeout)"},
	})
	checkGolden(t, "past.txt", got)
	for _, want := range []string{
		"System Notice: tool response for 1a2b3c4d-0001 (get_weather)\nstatus: ok, duration: 1.235s\n--- request ---\n{\"city\": \"Paris\"}\n--- response ---\nSunny, 21 °C\n--- end of tool response ---\n",
		"System Notice: tool response for 1a2b3c4d-0002 (current_time)\nstatus: failed, duration: 30s\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("XML-PAST lacks %q", want)
		}
	}
	if xmltransport.RenderPast(nil) != "" {
		t.Error("no responses must render nothing")
	}
}
