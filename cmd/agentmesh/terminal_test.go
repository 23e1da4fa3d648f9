package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestRunWritesNoControlSequencesToTheTerminal: what a model or a tool says reaches the
// terminal as text, never as a control sequence. The model's answer (streamed on stderr,
// printed on stdout) and the name of a tool it called carried ANSI escapes (clearing the screen,
// setting the window's title, a carriage return that overwrites the line shown) written raw,
// so any model output or tool result could rewrite what the user saw on their terminal.
func TestRunWritesNoControlSequencesToTheTerminal(t *testing.T) {
	isolate(t)
	const evil = "\x1b]0;pwned\x07\x1b[2J\u009b31m"
	llm := llmtest.New(t, llmtest.Scenario{Name: "escapes", Match: "say it", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{Name: "nope" + evil, Arguments: `{}`}}},
		{Content: "All " + evil + "done\rREWRITTEN\nsecond line\ttabbed"},
	}}, llmtest.Scenario{Name: "paused", Match: "pause it", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "call" + evil, Name: "calculator", Arguments: `{"expression":"1+1"}`}}},
	}})
	cfg := scriptedConfig(llm)
	cfg.Tools.RequireApproval = []string{"calculator"}
	addr := startMesh(t, cfg).Addr("orchestrator")
	out, errOut := runCLI(t, 0, "run", "--addr", addr, "say it")
	for name, text := range map[string]string{"stdout": out, "stderr": errOut} {
		if i := strings.IndexFunc(text, isTerminalControl); i >= 0 {
			t.Errorf("%s writes a control character at byte %d to the terminal:\n%q", name, i, text)
		}
	}
	// What was there is still shown, visibly.
	if want := "All ^[]0;pwned^G^[[2J\\u009b31mdone^MREWRITTEN\nsecond line\ttabbed\n"; out != want {
		t.Errorf("answer %q, want %q", out, want)
	}
	if !strings.Contains(errOut, "(nope^[]0;pwned") {
		t.Errorf("progress does not show the refused tool's name visibly:\n%s", errOut)
	}
	// The hint of a pause names the model's call id.
	out, errOut = runCLI(t, 0, "run", "--addr", addr, "pause it")
	for name, text := range map[string]string{"stdout": out, "stderr": errOut} {
		if i := strings.IndexFunc(text, isTerminalControl); i >= 0 {
			t.Errorf("paused: %s writes a control character at byte %d to the terminal:\n%q", name, i, text)
		}
	}
	if !strings.Contains(out, "approval of call call^[]0;pwned") {
		t.Errorf("the hint does not show the call's id visibly:\n%s", out)
	}
}

// isTerminalControl reports whether r would control a terminal rather than show as text: a C0
// control other than a line feed or a tab, DEL, or a C1 control.
func isTerminalControl(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f)
}

// TestRunKeepsAMultiLineMessageUnderItsLine: the progress shows what a run did one event a
// line, each marked at its start; the lines of a text of several lines (the user's message as
// the intent's goal and the plan's step) stay under the line that shows it. They began at
// the left margin, where they read as lines of the progress of their own.
func TestRunKeepsAMultiLineMessageUnderItsLine(t *testing.T) {
	isolate(t)
	addr := startMesh(t, config.Default()).Addr("orchestrator")
	_, errOut := runCLI(t, 0, "run", "--addr", addr, "Hello there\n· turn 9\nbye")
	for _, l := range strings.Split(strings.TrimRight(errOut, "\n"), "\n") {
		if strings.HasPrefix(l, "· turn 9") || strings.HasPrefix(l, "bye") {
			t.Errorf("a line of the message stands at the margin, as the progress's own: %q\n%s", l, errOut)
		}
	}
	if !strings.Contains(errOut, "  intent: Hello there\n    · turn 9\n    bye [question") {
		t.Errorf("the intent's goal does not keep its lines under it:\n%s", errOut)
	}
}

// TestJSONOutputWritesNoControlCharacters: the JSON the CLI prints (watch --json, run --json,
// get) holds a run's text with every terminal control escaped, C1 controls (U+0080 to U+009F)
// and DEL as \u0080 … \u009f and \u007f, and the same text once decoded. encoding/json and
// protojson escape C0 controls only: a model's answer carrying the C1 CSI (U+009B) reached
// the terminal raw, to be obeyed by those that take 8-bit controls.
func TestJSONOutputWritesNoControlCharacters(t *testing.T) {
	isolate(t)
	const evil = "\u009b2J\u0085\u007fend"
	llm := llmtest.New(t, llmtest.Scenario{Name: "c1", Match: "say it", Turns: []llmtest.Turn{
		{Content: "All " + evil},
	}})
	addr := startMesh(t, scriptedConfig(llm)).Addr("orchestrator")
	out, _ := runCLI(t, 0, "run", "--json", "--addr", addr, "say it")
	runID := regexp.MustCompile(`"runId":\s*"([^"]+)"`).FindStringSubmatch(out)
	if runID == nil {
		t.Fatalf("no run id in the result:\n%s", out)
	}
	get, _ := runCLI(t, 0, "get", runID[1], "--addr", addr)
	watch, _ := runCLI(t, 0, "watch", "--json", runID[1], "--addr", addr)
	for name, text := range map[string]string{"run --json": out, "get": get, "watch --json": watch} {
		if i := strings.IndexFunc(text, isTerminalControl); i >= 0 {
			t.Errorf("%s writes a control character at byte %d: %q", name, i, text[max(0, i-20):i+10])
		} else if !strings.Contains(text, `All \u009b2J\u0085\u007fend`) {
			t.Errorf("%s does not hold the answer escaped:\n%s", name, text)
		}
	}
	// Still JSON that decodes to the answer as it was.
	var ended struct {
		FinalReport struct{ Content string }
	}
	if err := json.Unmarshal([]byte(get), &ended); err != nil || ended.FinalReport.Content != "All "+evil {
		t.Errorf("get's JSON decodes to %q, %v; want the answer %q", ended.FinalReport.Content, err, "All "+evil)
	}
}
