package mesh_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// The scripted model does not know the run's nonce in advance: it reads it from the XML-NEXT
// message of the request, as a real model does.
var nonceRE = regexp.MustCompile(`Session nonce: ([0-9a-f]{8})\.`)

// nonceIn returns the nonce the request's XML-NEXT message announces, or "".
func nonceIn(req llmtest.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := nonceRE.FindStringSubmatch(string(req.Messages[i].Content)); m != nil {
			return m[1]
		}
	}
	return ""
}

// xmlTurn answers with the text write makes from the request's nonce.
func xmlTurn(write func(nonce string) string) llmtest.Turn {
	return xmlTurnStop("", write)
}

// xmlTurnStop is xmlTurn with a finish reason.
func xmlTurnStop(finish string, write func(nonce string) string) llmtest.Turn {
	return llmtest.Turn{Respond: func(req llmtest.Request, _ int) llmtest.Turn {
		return llmtest.Turn{Content: write(nonceIn(req)), FinishReason: finish}
	}}
}

func xmlSlot(nonce string, n int, tool, payload string) string {
	id := fmt.Sprintf("%s-%04d", nonce, n)
	return `<ai-agent-` + id + ` tool="` + tool + `">` + payload + `</ai-agent-` + id + `>`
}

func xmlOpenFinal(nonce, format string) string {
	return `<ai-agent-` + nonce + `-FINAL tool="agent__final_report" format="` + format + `">`
}

func xmlFinal(nonce, format, payload string) string {
	return xmlOpenFinal(nonce, format) + payload + `</ai-agent-` + nonce + `-FINAL>`
}

// lastContent is the content of the request's last message.
func lastContent(req llmtest.Request) string {
	return string(req.Messages[len(req.Messages)-1].Content)
}

// containsMessage reports whether a message of the request contains s.
func containsMessage(req llmtest.Request, s string) bool {
	return slices.ContainsFunc(req.Messages, func(m llmtest.Message) bool { return strings.Contains(string(m.Content), s) })
}

// toolEntries summarises the tool accounting entries as command/source.
func toolEntries(res *typev1.RunResult) []string {
	var out []string
	for _, a := range res.GetAccounting() {
		if a.GetType() == typev1.AccountingType_ACCOUNTING_TYPE_TOOL {
			out = append(out, a.GetCommand()+"/"+a.GetSource())
		}
	}
	return out
}

// transcriptNotes joins the details of the run's transcript entries.
func transcriptNotes(res *typev1.RunResult) string {
	var b strings.Builder
	for _, e := range res.GetTranscript() {
		b.WriteString(e.GetDetail() + "\n")
	}
	return b.String()
}

// xmlCase is one promise of seed 000 §11 (XML tool transport), run through the whole mesh.
type xmlCase struct {
	name       string
	transport  typev1.ToolTransport // TOOL_TRANSPORT_XML when unspecified
	overrides  func(*agentv1.RunOverrides)
	request    func(*agentv1.RunRequest)
	turns      []llmtest.Turn
	outcome    typev1.Outcome
	exit       string
	roles      string
	accounting string
	check      func(t *testing.T, h *harness, res *typev1.RunResult, reqs []llmtest.Request)
}

func TestXMLTransport(t *testing.T) {
	jsonRun := func(r *agentv1.RunRequest) {
		r.OutputFormat = typev1.OutputFormat_OUTPUT_FORMAT_JSON
		r.OutputSchema = mustStruct(t, map[string]any{
			"type": "object", "required": []any{"answer"},
			"properties": map[string]any{"answer": map[string]any{"type": "integer"}},
		})
	}
	cases := []xmlCase{
		{name: "tools in numbered slots, slots continue across turns",
			overrides: streamAnswers, // the tags' deltas are checked below
			turns: []llmtest.Turn{
				xmlTurn(func(n string) string {
					return "Let me compute that. " + xmlSlot(n, 1, "calculator", `{"expression":"6*7"}`) + " Done."
				}),
				xmlTurn(func(n string) string { return xmlSlot(n, 2, "current_time", `{}`) }),
				xmlTurn(func(n string) string { return xmlFinal(n, "text", "6 times 7 is 42.") }),
			},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, exit: "COMPLETED", roles: "SUAUAUA",
			accounting: "LLM:OK TOOL:OK LLM:OK TOOL:OK LLM:OK TOOL:OK",
			check: func(t *testing.T, h *harness, res *typev1.RunResult, reqs []llmtest.Request) {
				if got := res.GetFinalReport().GetContent(); got != "6 times 7 is 42." {
					t.Errorf("final report %q", got)
				}
				if len(reqs) != 3 {
					t.Fatalf("%d LLM requests, want 3", len(reqs))
				}
				n := nonceIn(reqs[0])
				for i, req := range reqs {
					if tools := req.ToolNames(); len(tools) != 0 || req.Has("tool_choice") {
						t.Errorf("request %d offered tools %v (tool_choice %s); xml mode withholds them", i, tools, req.ToolChoice)
					}
					if got := lastContent(req); !strings.Contains(got, "Session nonce: "+n+".") {
						t.Errorf("request %d does not end with the XML-NEXT of nonce %s: %q", i, n, got)
					}
				}
				for i, first := range []string{"0001", "0002", "0003"} {
					if want := "Slots for this turn: " + n + "-" + first; !strings.Contains(lastContent(reqs[i]), want) {
						t.Errorf("request %d: XML-NEXT lacks %q", i, want)
					}
				}
				if next := lastContent(reqs[0]); !strings.Contains(next, "### calculator") || !strings.Contains(next, `"expression"`) {
					t.Errorf("XML-NEXT does not list the tools with their schemas: %q", next)
				}
				past := res.GetConversation()[3].GetContent()
				if !strings.HasPrefix(past, "System Notice: tool response for "+n+"-0001 (calculator)\nstatus: ok") ||
					!strings.Contains(past, "--- request ---\n{\"expression\":\"6*7\"}\n--- response ---\n42\n") {
					t.Errorf("XML-PAST %q", past)
				}
				if !strings.Contains(res.GetConversation()[5].GetContent(), n+"-0002 (current_time)") {
					t.Errorf("second XML-PAST %q", res.GetConversation()[5].GetContent())
				}
				if !containsMessage(reqs[1], "tool response for "+n+"-0001") {
					t.Error("the XML-PAST message was not sent on the next turn")
				}
				for _, m := range res.GetConversation() {
					if strings.Contains(m.GetContent(), "Session nonce:") {
						t.Errorf("XML-NEXT was stored in the conversation: %q", m.GetContent())
					}
					if len(m.GetToolCalls()) > 0 {
						t.Errorf("xml mode stored native tool calls %v", m.GetToolCalls())
					}
				}
				if got, want := toolEntries(res), []string{"calculator/xml", "current_time/xml", "agent__final_report_xml/xml"}; !slices.Equal(got, want) {
					t.Errorf("tool accounting %v, want %v", got, want)
				}
				// Events: the tool runs under its slot id, and the streamed tag arrives whole.
				evs, _ := h.storedEvents(t, res.GetRunId())
				var started []string
				var deltas []string
				for _, ev := range evs {
					if s := ev.GetToolStarted(); s != nil {
						started = append(started, s.GetCall().GetId())
					}
					if d := ev.GetLlmDelta(); d != nil && d.GetTurn() == 1 {
						deltas = append(deltas, d.GetContent())
					}
				}
				if want := []string{n + "-0001", n + "-0002"}; !slices.Equal(started, want) {
					t.Errorf("tool_started ids %v, want %v", started, want)
				}
				// Deltas within 50 ms of the last event go out together: the tag is whole in one.
				whole := func(tag string) func(string) bool { return func(d string) bool { return strings.Contains(d, tag) } }
				if tag := xmlSlot(n, 1, "calculator", `{"expression":"6*7"}`); !slices.ContainsFunc(deltas, whole(tag)) ||
					strings.Join(deltas, "") != "Let me compute that. "+tag+" Done." {
					t.Errorf("turn 1 llm_delta contents %q: want the tag whole in one", deltas)
				}
				checkEvents(t, h, res)
			}},
		{name: "a wrong nonce is ignored and uses no slot",
			turns: []llmtest.Turn{
				{Content: `<ai-agent-wrongnon-0001 tool="calculator">{"expression":"1+1"}</ai-agent-wrongnon-0001>`},
				xmlTurn(func(n string) string { return xmlSlot(n, 1, "calculator", `{"expression":"6*7"}`) }),
				xmlTurn(func(n string) string { return xmlFinal(n, "text", "42") }),
			},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, exit: "COMPLETED", roles: "SUAAUA",
			accounting: "LLM:OK LLM:OK TOOL:OK LLM:OK TOOL:OK",
			check: func(t *testing.T, _ *harness, res *typev1.RunResult, reqs []llmtest.Request) {
				n := nonceIn(reqs[0])
				next := lastContent(reqs[1])
				if !strings.Contains(next, "these tags of your last answer were ignored") || !strings.Contains(next, `nonce "wrongnon" is not this session's`) ||
					!strings.Contains(next, "Slots for this turn: "+n+"-0001") {
					t.Errorf("XML-NEXT after the ignored tag: %q", next)
				}
				if strings.Contains(lastContent(reqs[2]), "were ignored") {
					t.Error("the ignored tag was reported again a turn later")
				}
				if !strings.Contains(transcriptNotes(res), "ignored <ai-agent-wrongnon-0001") {
					t.Errorf("transcript does not note the ignored tag:\n%s", transcriptNotes(res))
				}
				if past := res.GetConversation()[4].GetContent(); !strings.Contains(past, n+"-0001 (calculator)") || !strings.Contains(past, "\n42\n") {
					t.Errorf("XML-PAST %q", past)
				}
				if res.GetToolCalls() != 1 {
					t.Errorf("%d tool calls executed, want 1", res.GetToolCalls())
				}
			}},
		{name: "the per-turn limit and unknown tools apply to slots",
			overrides: func(o *agentv1.RunOverrides) { o.MaxToolCallsPerTurn = i32(2) },
			turns: []llmtest.Turn{
				xmlTurn(func(n string) string {
					return xmlSlot(n, 1, "teleport", `{}`) + xmlSlot(n, 2, "calculator", `{"expression": "1+1"`) +
						xmlSlot(n, 3, "calculator", `{"expression":"2+2"}`)
				}),
				xmlTurn(func(n string) string { return xmlFinal(n, "text", "2") }),
			},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, exit: "COMPLETED", roles: "SUAUA",
			accounting: "LLM:OK TOOL:OK LLM:OK TOOL:OK",
			check: func(t *testing.T, _ *harness, res *typev1.RunResult, reqs []llmtest.Request) {
				n := nonceIn(reqs[0])
				past := res.GetConversation()[3].GetContent()
				for _, want := range []string{
					n + "-0001 (teleport)\nstatus: failed", `unknown tool "teleport"`,
					n + "-0002 (calculator)\nstatus: ok", "--- response ---\n2\n",
					n + "-0003 (calculator)\nstatus: failed", "dropped: at most 2 tool calls may run in one turn",
				} {
					if !strings.Contains(past, want) {
						t.Errorf("XML-PAST lacks %q:\n%s", want, past)
					}
				}
				if !strings.Contains(transcriptNotes(res), n+"-0002 (calculator) arguments repaired") {
					t.Errorf("the repaired arguments are not in the transcript:\n%s", transcriptNotes(res))
				}
				if !strings.Contains(lastContent(reqs[1]), "Slots for this turn: "+n+"-0004") {
					t.Errorf("turn 2 XML-NEXT %q", lastContent(reqs[1]))
				}
			}},
		{name: "an unclosed final report cut off by the token limit is retried",
			turns: []llmtest.Turn{{Respond: func(req llmtest.Request, _ int) llmtest.Turn {
				n := nonceIn(req)
				if containsMessage(req, "was cut off") {
					return llmtest.Turn{Content: xmlFinal(n, "text", "The full answer.")}
				}
				return llmtest.Turn{Content: xmlOpenFinal(n, "text") + "The full ans", FinishReason: "length"}
			}}},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUA", accounting: "LLM:OK LLM:OK TOOL:OK",
			check: func(t *testing.T, _ *harness, res *typev1.RunResult, reqs []llmtest.Request) {
				if len(reqs) != 2 {
					t.Fatalf("%d LLM requests, want a retry", len(reqs))
				}
				msgs := reqs[1].Messages
				if notice := string(msgs[len(msgs)-2].Content); !strings.Contains(notice, "was cut off before its closing tag") || !strings.Contains(notice, "stop reason length") {
					t.Errorf("retry notice %q", notice)
				}
				if !strings.Contains(lastContent(reqs[1]), "Session nonce: ") {
					t.Error("XML-NEXT is not the last message of the retry")
				}
				if got := res.GetFinalReport().GetContent(); got != "The full answer." {
					t.Errorf("final report %q", got)
				}
				if got := res.GetAccounting()[0].GetStopReason(); got != "length" {
					t.Errorf("first attempt stop reason %q", got)
				}
				for _, m := range res.GetConversation() {
					if strings.Contains(m.GetContent(), "The full ans") && !strings.Contains(m.GetContent(), "The full answer.") || strings.Contains(m.GetContent(), "was cut off") {
						t.Errorf("the cut-off answer or the notice was stored: %q", m.GetContent())
					}
				}
			}},
		{name: "an unclosed final slot of another tool is ignored, not retried as cut off",
			turns: []llmtest.Turn{
				xmlTurnStop("length", func(n string) string { return `<ai-agent-` + n + `-FINAL tool="final_report">The full ans` }),
				xmlTurn(func(n string) string { return xmlFinal(n, "text", "The full answer.") }),
			},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUAA", accounting: "LLM:OK LLM:OK TOOL:OK",
			check: func(t *testing.T, _ *harness, res *typev1.RunResult, reqs []llmtest.Request) {
				for i, req := range reqs {
					if containsMessage(req, "was cut off") {
						t.Errorf("request %d tells the model its final report was cut off: the tag was no final report", i+1)
					}
				}
				if len(reqs) != 2 || !strings.Contains(lastContent(reqs[1]), `the final slot is for agent__final_report, not "final_report"`) {
					t.Fatalf("%d LLM requests, the last ending %q; want 2, the second telling why the tag was ignored", len(reqs), lastContent(reqs[len(reqs)-1]))
				}
				if got := res.GetFinalReport().GetContent(); got != "The full answer." {
					t.Errorf("final report %q", got)
				}
			}},
		{name: "a final report cut off in every attempt is kept, flagged partial",
			overrides: func(o *agentv1.RunOverrides) { o.MaxRetries = i32(2) },
			turns:     []llmtest.Turn{xmlTurnStop("length", func(n string) string { return xmlOpenFinal(n, "text") + "The full ans" })},
			outcome:   typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUA", accounting: "LLM:OK LLM:OK TOOL:OK",
			check: func(t *testing.T, _ *harness, res *typev1.RunResult, _ []llmtest.Request) {
				r := res.GetFinalReport()
				if r.GetContent() != "The full ans" || r.GetStatus() != typev1.ReportStatus_REPORT_STATUS_PARTIAL || !r.GetMetadata().GetFields()["truncated"].GetBoolValue() {
					t.Errorf("final report %v, want the cut-off text, PARTIAL, truncated", r)
				}
				if !strings.Contains(transcriptNotes(res), "cut off before its closing tag in every attempt") {
					t.Errorf("transcript does not note the cut-off report:\n%s", transcriptNotes(res))
				}
			}},
		{name: "an unclosed final report at a normal stop is accepted",
			turns:   []llmtest.Turn{xmlTurn(func(n string) string { return xmlOpenFinal(n, "text") + "The answer is 42.\n</ai-agent-" })},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUA", accounting: "LLM:OK TOOL:OK",
			check: func(t *testing.T, _ *harness, res *typev1.RunResult, _ []llmtest.Request) {
				if got := res.GetFinalReport().GetContent(); got != "The answer is 42." {
					t.Errorf("final report %q", got)
				}
				if !strings.Contains(transcriptNotes(res), "final report accepted without its closing tag") {
					t.Errorf("transcript does not note the missing closing tag:\n%s", transcriptNotes(res))
				}
			}},
		{name: "a forced final turn advertises only the final slot",
			overrides: func(o *agentv1.RunOverrides) { o.ForceSynthesisAtRatio = func() *float64 { v := 0.0001; return &v }() },
			turns: []llmtest.Turn{xmlTurn(func(n string) string {
				return xmlSlot(n, 1, "calculator", `{"expression":"1+1"}`) + xmlFinal(n, "markdown", "I could not calculate.")
			})},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUA", accounting: "LLM:OK TOOL:OK",
			check: func(t *testing.T, _ *harness, res *typev1.RunResult, reqs []llmtest.Request) {
				next := lastContent(reqs[0])
				if !strings.Contains(next, "This is the final turn") || strings.Contains(next, "## Tools") || strings.Contains(next, "calculator") {
					t.Errorf("forced final XML-NEXT %q", next)
				}
				if len(reqs[0].ToolNames()) != 0 {
					t.Errorf("forced final turn offered %v", reqs[0].ToolNames())
				}
				notes := transcriptNotes(res)
				if !strings.Contains(notes, "no tools are available in the final turn") || !strings.Contains(notes, `format "markdown" normalised to "text"`) {
					t.Errorf("transcript notes:\n%s", notes)
				}
				if got := res.GetFinalReport().GetContent(); got != "I could not calculate." {
					t.Errorf("final report %q", got)
				}
			}},
		{name: "the last turn under max_turns advertises only the final slot", // issue 11.3
			overrides: func(o *agentv1.RunOverrides) { o.MaxTurns = i32(1) },
			turns: []llmtest.Turn{xmlTurn(func(n string) string {
				return xmlSlot(n, 1, "calculator", `{"expression":"1+1"}`) + xmlFinal(n, "text", "I could not calculate.")
			})},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUA", accounting: "LLM:OK TOOL:OK",
			check: func(t *testing.T, _ *harness, res *typev1.RunResult, reqs []llmtest.Request) {
				next := lastContent(reqs[0])
				if !strings.Contains(next, "This is the final turn") || strings.Contains(next, "## Tools") || strings.Contains(next, "calculator") {
					t.Errorf("last turn XML-NEXT %q", next)
				}
				if !strings.Contains(transcriptNotes(res), "no tools are available in the final turn") {
					t.Errorf("transcript notes:\n%s", transcriptNotes(res))
				}
				if got := toolEntries(res); !slices.Equal(got, []string{"agent__final_report_xml/xml"}) {
					t.Errorf("tool accounting %v: the slot's call ran", got)
				}
			}},
		{name: "a json final report is validated, refused, then fixed", request: jsonRun,
			turns: []llmtest.Turn{
				xmlTurn(func(n string) string { return xmlFinal(n, "json", `{"answer":"forty-two"}`) }),
				xmlTurn(func(n string) string { return xmlFinal(n, "json", "```json\n{\"answer\": 42}\n```") }),
			},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUAUA", accounting: "LLM:OK TOOL:FAILED LLM:OK TOOL:OK",
			check: func(t *testing.T, _ *harness, res *typev1.RunResult, reqs []llmtest.Request) {
				n := nonceIn(reqs[0])
				if got := res.GetFinalReport().GetContentJson().GetFields()["answer"].GetNumberValue(); got != 42 {
					t.Errorf("content_json %v", res.GetFinalReport().GetContentJson())
				}
				if next := lastContent(reqs[0]); !strings.Contains(next, `format="json"`) || !strings.Contains(next, `"required":["answer"]`) {
					t.Errorf("XML-NEXT lacks the json format and schema: %q", next)
				}
				refusal := res.GetConversation()[3].GetContent()
				if !strings.Contains(refusal, "tool response for "+n+"-FINAL (agent__final_report)\nstatus: failed") || !strings.Contains(refusal, "does not match the output schema") {
					t.Errorf("refusal %q", refusal)
				}
				if !strings.Contains(lastContent(reqs[1]), "This is the final turn") {
					t.Errorf("the turn after a refused report is not final: %q", lastContent(reqs[1]))
				}
				if got, want := toolEntries(res), []string{"agent__final_report_xml/xml", "agent__final_report_xml/xml"}; !slices.Equal(got, want) {
					t.Errorf("tool accounting %v", got)
				}
			}},
		{name: "xml-final: native tool calls, the final report in the XML slot", transport: typev1.ToolTransport_TOOL_TRANSPORT_XML_FINAL,
			turns: []llmtest.Turn{
				call("calculator", `{"expression":"6*7"}`),
				xmlTurn(func(n string) string { return "Here it is. " + xmlFinal(n, "text", "6 times 7 is 42.") }),
			},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, exit: "COMPLETED", roles: "SUATA", accounting: "LLM:OK TOOL:OK LLM:OK TOOL:OK",
			check: func(t *testing.T, _ *harness, res *typev1.RunResult, reqs []llmtest.Request) {
				for i, req := range reqs {
					if tools := req.ToolNames(); !slices.Contains(tools, "calculator") || slices.Contains(tools, "final_report") || req.ToolChoiceName() != "auto" {
						t.Errorf("request %d offered %v with tool_choice %q", i, tools, req.ToolChoiceName())
					}
					next := lastContent(req)
					if !strings.Contains(next, "-FINAL tool=\"agent__final_report\"") || strings.Contains(next, "## Tools") || strings.Contains(next, "-PROGRESS") {
						t.Errorf("request %d XML-NEXT %q", i, next)
					}
				}
				if got := toolMessage(t, res, 0); got != "42" {
					t.Errorf("native tool message %q", got)
				}
				if got := res.GetFinalReport().GetContent(); got != "6 times 7 is 42." {
					t.Errorf("final report %q", got)
				}
				if got, want := toolEntries(res), []string{"calculator/native", "agent__final_report_xml/xml"}; !slices.Equal(got, want) {
					t.Errorf("tool accounting %v, want %v", got, want)
				}
			}},
		{name: "xml-final: an unclosed final report under another stop reason is accepted with a note", transport: typev1.ToolTransport_TOOL_TRANSPORT_XML_FINAL,
			turns: []llmtest.Turn{{Respond: func(req llmtest.Request, _ int) llmtest.Turn {
				return llmtest.Turn{
					Content:   xmlOpenFinal(nonceIn(req), "text") + "It is 42.",
					ToolCalls: []llmtest.ToolCall{{ID: "call_calc", Name: "calculator", Arguments: `{"expression":"6*7"}`}},
				}
			}}},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, exit: "COMPLETED", roles: "SUAT", accounting: "LLM:OK TOOL:OK TOOL:OK",
			check: func(t *testing.T, _ *harness, res *typev1.RunResult, _ []llmtest.Request) {
				if got := res.GetAccounting()[0].GetStopReason(); got != "tool_calls" {
					t.Fatalf("stop reason %q", got)
				}
				if !strings.Contains(transcriptNotes(res), `accepted the final report without its closing tag under the unknown stop reason "tool_calls"`) {
					t.Errorf("transcript does not note the unknown stop reason:\n%s", transcriptNotes(res))
				}
				if got := res.GetFinalReport().GetContent(); got != "It is 42." || toolMessage(t, res, 0) != "42" {
					t.Errorf("final report %q, tool message %q", got, toolMessage(t, res, 0))
				}
			}},
	}

	var scenarios []llmtest.Scenario
	for _, tc := range cases {
		scenarios = append(scenarios, llmtest.Scenario{Name: tc.name, Match: "xml: " + tc.name, Turns: tc.turns})
	}
	h := start(t, nil, scenarios...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := &agentv1.RunOverrides{ToolTransport: tc.transport}
			if o.ToolTransport == typev1.ToolTransport_TOOL_TRANSPORT_UNSPECIFIED {
				o.ToolTransport = typev1.ToolTransport_TOOL_TRANSPORT_XML
			}
			if tc.overrides != nil {
				tc.overrides(o)
			}
			req := &agentv1.RunRequest{Message: "xml: " + tc.name, Overrides: o}
			if tc.request != nil {
				tc.request(req)
			}
			res := h.runCase(t, req, tc.outcome, tc.exit, tc.roles, tc.accounting)
			if tc.check != nil {
				tc.check(t, h, res, requestsFor(h.llm, req.GetMessage()))
			}
		})
	}
}

// TestXMLCallsGoThroughApproval: a slot's tool call pauses for approval under its slot id and
// runs once approved.
func TestXMLCallsGoThroughApproval(t *testing.T) {
	h := approvalMesh(t, llmtest.Scenario{Name: "approve", Match: "approve my xml call", Turns: []llmtest.Turn{
		xmlTurn(func(n string) string { return xmlSlot(n, 1, "calculator", `{"expression":"6*7"}`) }),
		xmlTurn(func(n string) string { return xmlFinal(n, "text", "42") }),
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "approve my xml call", Overrides: &agentv1.RunOverrides{ToolTransport: typev1.ToolTransport_TOOL_TRANSPORT_XML}})
	n := nonceIn(h.llm.Requests()[0])
	paused(t, res, n+"-0001")
	h.resolve(t, &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: n + "-0001", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE})
	res, _ = h.finish(t, res.GetRunId())
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS || res.GetFinalReport().GetContent() != "42" {
		t.Fatalf("outcome %s %q (%v)", res.GetOutcome(), res.GetFinalReport().GetContent(), res.GetError())
	}
	if past := res.GetConversation()[3].GetContent(); !strings.Contains(past, n+"-0001 (calculator)\nstatus: ok") {
		t.Errorf("XML-PAST %q", past)
	}
	checkInvariants(t, res)
}
