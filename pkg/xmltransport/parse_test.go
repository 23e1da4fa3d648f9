package xmltransport_test

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/pkg/xmltransport"
)

const nonce = "1a2b3c4d"

// call is a numbered tag.
func call(slot, tool, payload string) string {
	return `<ai-agent-` + nonce + `-` + slot + ` tool="` + tool + `">` + payload + `</ai-agent-` + nonce + `-` + slot + `>`
}

// final is a closed final-report tag.
func final(format, payload string) string {
	return `<ai-agent-` + nonce + `-FINAL tool="agent__final_report" format="` + format + `">` + payload + `</ai-agent-` + nonce + `-FINAL>`
}

const openFinal = `<ai-agent-` + nonce + `-FINAL tool="agent__final_report" format="markdown">`

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name       string
		text       string
		next       int
		stop       string
		calls      []xmltransport.Call
		final      *xmltransport.Final
		progress   string
		nextSlot   int
		incomplete bool
		warnings   int
		ignored    []string // substrings of the reasons, in order
	}{
		{
			name: "calls in order with text around them", next: 1, stop: "stop",
			text: "Let me check.\n" + call("0001", "get_weather", ` {"city": "Paris"} `) + "\nand\n" + call("0002", "get_time", `{}`),
			calls: []xmltransport.Call{
				{Slot: nonce + "-0001", Number: 1, Tool: "get_weather", Payload: `{"city": "Paris"}`},
				{Slot: nonce + "-0002", Number: 2, Tool: "get_time", Payload: `{}`},
			},
			nextSlot: 3,
		},
		{
			name: "slots continue across turns", next: 4, stop: "tool_calls",
			text:     call("0004", "a", `{}`) + call("0006", "b", `{}`),
			calls:    []xmltransport.Call{{Slot: nonce + "-0004", Number: 4, Tool: "a", Payload: `{}`}, {Slot: nonce + "-0006", Number: 6, Tool: "b", Payload: `{}`}},
			nextSlot: 7,
		},
		{
			name: "a slot of an earlier turn is ignored", next: 4,
			text:     call("0003", "a", `{}`),
			nextSlot: 4, ignored: []string{"slot 1a2b3c4d-0003 was used by an earlier turn (this turn starts at 1a2b3c4d-0004)"},
		},
		{
			name: "a slot used twice keeps the first", next: 1,
			text:     call("0001", "a", `{"n": 1}`) + call("0001", "b", `{"n": 2}`),
			calls:    []xmltransport.Call{{Slot: nonce + "-0001", Number: 1, Tool: "a", Payload: `{"n": 1}`}},
			nextSlot: 2, ignored: []string{"slot 1a2b3c4d-0001 is used twice"},
		},
		{
			name: "another nonce is ignored", next: 1,
			text:     `<ai-agent-deadbeef-0001 tool="a">{}</ai-agent-deadbeef-0001>`,
			nextSlot: 1, ignored: []string{`nonce "deadbeef" is not this session's`},
		},
		{
			name: "mismatched closing tag is ignored", next: 1,
			text:     `<ai-agent-` + nonce + `-0001 tool="a">{}</ai-agent-` + nonce + `-0002>`,
			nextSlot: 1, ignored: []string{"no closing tag </ai-agent-1a2b3c4d-0001>"},
		},
		{
			name: "unclosed tool tag is ignored even when the answer ended normally", next: 1, stop: "stop",
			text:     `<ai-agent-` + nonce + `-0001 tool="a">{"x": 1}`,
			nextSlot: 1, ignored: []string{"no closing tag"},
		},
		{
			name: "missing tool attribute", next: 1,
			text:     `<ai-agent-` + nonce + `-0001>{}</ai-agent-` + nonce + `-0001>`,
			nextSlot: 1, ignored: []string{"no tool attribute"},
		},
		{
			name: "unknown slot names", next: 1,
			text:     call("01", "a", `{}`) + call("ABCD", "a", `{}`) + call("0000", "a", `{}`),
			nextSlot: 1, ignored: []string{`unknown slot "01"`, `unknown slot "ABCD"`, `unknown slot "0000"`},
		},
		{
			name: "opening tag never finished", next: 1,
			text:     `text <ai-agent-` + nonce + `-0001 tool="a"`,
			nextSlot: 1, ignored: []string{`no closing ">"`},
		},
		{
			name: "attributes in single quotes and odd spacing", next: 1,
			text:     "<ai-agent-" + nonce + "-0001\n  tool='a' >{}</ai-agent-" + nonce + "-0001>",
			calls:    []xmltransport.Call{{Slot: nonce + "-0001", Number: 1, Tool: "a", Payload: `{}`}},
			nextSlot: 2,
		},
		{
			name: "final report with format", next: 1, stop: "stop",
			text:     "Done.\n" + final("markdown", "\n# Report\nAll good.\n"),
			final:    &xmltransport.Final{Slot: nonce + "-FINAL", Format: "markdown", Payload: "# Report\nAll good.", Closed: true},
			nextSlot: 1,
		},
		{
			name: "the last valid final report wins", next: 1, stop: "stop",
			text:     final("markdown", "first") + final("json", `{"a": 1}`) + `<ai-agent-` + nonce + `-FINAL tool="agent__final_report"></ai-agent-` + nonce + `-FINAL>`,
			final:    &xmltransport.Final{Slot: nonce + "-FINAL", Format: "json", Payload: `{"a": 1}`, Closed: true},
			nextSlot: 1, ignored: []string{"the final report is empty"},
		},
		{
			name: "final slot with another tool", next: 1,
			text:     `<ai-agent-` + nonce + `-FINAL tool="get_weather">x</ai-agent-` + nonce + `-FINAL>`,
			nextSlot: 1, ignored: []string{`the final slot is for agent__final_report, not "get_weather"`},
		},
		{
			name: "final without format attribute", next: 1, stop: "stop",
			text:     `<ai-agent-` + nonce + `-FINAL tool="agent__final_report">report</ai-agent-` + nonce + `-FINAL>`,
			final:    &xmltransport.Final{Slot: nonce + "-FINAL", Payload: "report", Closed: true},
			nextSlot: 1,
		},
		{name: "unclosed final, stop accepts", next: 1, stop: "stop", text: openFinal + "\nThe answer is 42.\n",
			final: &xmltransport.Final{Slot: nonce + "-FINAL", Format: "markdown", Payload: "The answer is 42."}, nextSlot: 1},
		{name: "unclosed final, end_turn accepts", next: 1, stop: "end_turn", text: openFinal + "42",
			final: &xmltransport.Final{Slot: nonce + "-FINAL", Format: "markdown", Payload: "42"}, nextSlot: 1},
		{name: "unclosed final, end accepts", next: 1, stop: "end", text: openFinal + "42",
			final: &xmltransport.Final{Slot: nonce + "-FINAL", Format: "markdown", Payload: "42"}, nextSlot: 1},
		{name: "unclosed final, eos accepts", next: 1, stop: "EOS", text: openFinal + "42",
			final: &xmltransport.Final{Slot: nonce + "-FINAL", Format: "markdown", Payload: "42"}, nextSlot: 1},
		{name: "unclosed final, length is incomplete", next: 1, stop: "length", text: openFinal + "The answer is",
			nextSlot: 1, incomplete: true, ignored: []string{"cut off (stop reason length)"}},
		{name: "unclosed final, max_tokens is incomplete", next: 1, stop: "max_tokens", text: openFinal + "The answer is",
			nextSlot: 1, incomplete: true, ignored: []string{"cut off (stop reason max_tokens)"}},
		{name: "unclosed final, unknown stop reason accepts with a warning", next: 1, stop: "content_filter", text: openFinal + "42",
			final: &xmltransport.Final{Slot: nonce + "-FINAL", Format: "markdown", Payload: "42"}, nextSlot: 1, warnings: 1},
		{name: "unclosed final, no stop reason accepts with a warning", next: 1, text: openFinal + "42",
			final: &xmltransport.Final{Slot: nonce + "-FINAL", Format: "markdown", Payload: "42"}, nextSlot: 1, warnings: 1},
		{name: "unclosed final drops a half-written closing tag", next: 1, stop: "stop", text: openFinal + "42\n</ai-agent-" + nonce + "-FIN",
			final: &xmltransport.Final{Slot: nonce + "-FINAL", Format: "markdown", Payload: "42"}, nextSlot: 1},
		{name: "unclosed final slot with another tool is ignored, not retried", next: 1, stop: "length",
			text:     `<ai-agent-` + nonce + `-FINAL tool="final_report">The answer is`,
			nextSlot: 1, ignored: []string{`the final slot is for agent__final_report, not "final_report"`}},
		{name: "unclosed final slot with another tool is ignored without a warning", next: 1, stop: "content_filter",
			text:     `<ai-agent-` + nonce + `-FINAL tool="final_report">42`,
			nextSlot: 1, ignored: []string{`the final slot is for agent__final_report, not "final_report"`}},
		{name: "unclosed final slot without a tool attribute", next: 1, stop: "length",
			text:     `<ai-agent-` + nonce + `-FINAL>The answer is`,
			nextSlot: 1, ignored: []string{"the tag has no tool attribute"}},
		{name: "unclosed final without content is ignored", next: 1, stop: "stop", text: openFinal + "\n  ",
			nextSlot: 1, ignored: []string{"no closing tag and no content"}},
		{
			name: "a closed final survives a later truncated one", next: 1, stop: "length",
			text:     final("markdown", "complete") + openFinal + "partial",
			final:    &xmltransport.Final{Slot: nonce + "-FINAL", Format: "markdown", Payload: "complete", Closed: true},
			nextSlot: 1, ignored: []string{"cut off"},
		},
		{
			name: "progress slot", next: 1, stop: "stop",
			text:     `<ai-agent-` + nonce + `-PROGRESS tool="agent__progress_report">Checking the weather</ai-agent-` + nonce + `-PROGRESS>` + call("0001", "a", "{}"),
			calls:    []xmltransport.Call{{Slot: nonce + "-0001", Number: 1, Tool: "a", Payload: `{}`}},
			progress: "Checking the weather", nextSlot: 2,
		},
		{
			name: "progress slot with another tool", next: 1,
			text:     `<ai-agent-` + nonce + `-PROGRESS tool="x">y</ai-agent-` + nonce + `-PROGRESS>`,
			nextSlot: 1, ignored: []string{"the progress slot is for agent__progress_report"},
		},
		{name: "no tags", next: 3, text: "Just text, <b>bold</b> and <ai-agent without more.", nextSlot: 3},
		{name: "slot numbers start at 1", next: 0, text: call("0001", "a", "{}"),
			calls: []xmltransport.Call{{Slot: nonce + "-0001", Number: 1, Tool: "a", Payload: `{}`}}, nextSlot: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := xmltransport.Parse(tc.text, nonce, tc.next, tc.stop)
			if !reflect.DeepEqual(r.Calls, tc.calls) {
				t.Errorf("calls = %+v\nwant %+v", r.Calls, tc.calls)
			}
			if !reflect.DeepEqual(r.Final, tc.final) {
				t.Errorf("final = %+v, want %+v", r.Final, tc.final)
			}
			switch {
			case tc.progress == "" && r.Progress != nil:
				t.Errorf("progress = %+v, want none", r.Progress)
			case tc.progress != "" && (r.Progress == nil || r.Progress.Payload != tc.progress || r.Progress.Slot != nonce+"-PROGRESS"):
				t.Errorf("progress = %+v, want %q", r.Progress, tc.progress)
			}
			if r.NextSlot != tc.nextSlot || r.Incomplete != tc.incomplete || len(r.Warnings) != tc.warnings {
				t.Errorf("next slot %d incomplete %v warnings %q, want %d %v %d", r.NextSlot, r.Incomplete, r.Warnings, tc.nextSlot, tc.incomplete, tc.warnings)
			}
			if len(r.Ignored) != len(tc.ignored) {
				t.Fatalf("ignored = %+v, want %q", r.Ignored, tc.ignored)
			}
			for i, want := range tc.ignored {
				if !strings.Contains(r.Ignored[i].Reason, want) || !strings.HasPrefix(r.Ignored[i].Tag, "<ai-agent-") {
					t.Errorf("ignored[%d] = %+v, want a reason containing %q", i, r.Ignored[i], want)
				}
			}
		})
	}
}

func TestSessionSlots(t *testing.T) {
	s := xmltransport.NewSession(xmltransport.ModeXML)
	if len(s.Nonce) != 8 || strings.Trim(s.Nonce, "0123456789abcdef") != "" || s.NextSlot != 1 {
		t.Fatalf("session = %+v, want an 8 hex digit nonce and slot 1", s)
	}
	if other := xmltransport.NewNonce(); other == s.Nonce {
		t.Errorf("two nonces are equal: %s", other)
	}
	if s.Slot(1) != s.Nonce+"-0001" || s.Slot(12345) != s.Nonce+"-12345" || s.FinalSlot() != s.Nonce+"-FINAL" || s.ProgressSlot() != s.Nonce+"-PROGRESS" {
		t.Errorf("slot ids %q %q %q %q", s.Slot(1), s.Slot(12345), s.FinalSlot(), s.ProgressSlot())
	}

	tagOf := func(n int, tool string) string {
		id := s.Slot(n)
		return `<ai-agent-` + id + ` tool="` + tool + `">{}</ai-agent-` + id + `>`
	}
	turn1 := s.Parse(tagOf(1, "a")+tagOf(2, "b")+tagOf(3, "c"), "tool_calls")
	if len(turn1.Calls) != 3 || s.NextSlot != 4 {
		t.Fatalf("turn 1: %d calls, next slot %d; want 3 and 4", len(turn1.Calls), s.NextSlot)
	}
	turn2 := s.Parse(tagOf(2, "again")+tagOf(4, "d"), "tool_calls")
	if len(turn2.Calls) != 1 || turn2.Calls[0].Slot != s.Nonce+"-0004" || len(turn2.Ignored) != 1 || s.NextSlot != 5 {
		t.Errorf("turn 2 = %+v, next slot %d; want only slot 0004 and next 5", turn2, s.NextSlot)
	}
	empty := s.Parse("no tags", "stop")
	if len(empty.Calls) != 0 || s.NextSlot != 5 {
		t.Errorf("a turn without tags moved the slot to %d", s.NextSlot)
	}
}

func TestModes(t *testing.T) {
	for _, tc := range []struct {
		in                                          string
		mode                                        xmltransport.Mode
		providerTools, xmlTools, xmlFinal, progress bool
		past                                        bool
		choiceRequired                              string
	}{
		{"", xmltransport.ModeNative, true, false, false, false, false, "required"},
		{"native", xmltransport.ModeNative, true, false, false, false, false, "required"},
		{"xml-final", xmltransport.ModeXMLFinal, true, false, true, false, false, "auto"},
		{"xml", xmltransport.ModeXML, false, true, true, true, true, "auto"},
	} {
		m, err := xmltransport.ParseMode(tc.in)
		if err != nil || m != tc.mode {
			t.Fatalf("ParseMode(%q) = %q %v", tc.in, m, err)
		}
		if m.ProviderTools() != tc.providerTools || m.XMLTools() != tc.xmlTools || m.XMLFinal() != tc.xmlFinal ||
			m.Progress() != tc.progress || m.PastMessages() != tc.past || m.ToolChoice(true) != tc.choiceRequired || m.ToolChoice(false) != "auto" {
			t.Errorf("mode %q flags wrong", m)
		}
	}
	if _, err := xmltransport.ParseMode("json"); err == nil || !strings.Contains(err.Error(), `unknown tool transport "json"`) {
		t.Errorf("ParseMode(json) error = %v", err)
	}
}

// TestAnUnclosedTagIsCutWhole: the fragment of an opening tag with no closing ">" that the
// ignored list quotes is cut at a character, not inside one: it goes back to the model in a
// protobuf string, which must be UTF-8.
func TestAnUnclosedTagIsCutWhole(t *testing.T) {
	for pad := range 4 { // the cut at 80 bytes falls on each byte of a 4-byte character
		text := `<ai-agent-` + nonce + `-0001 tool="` + strings.Repeat("a", 40+pad) + strings.Repeat("😀", 20)
		res := xmltransport.Parse(text, nonce, 1, "stop")
		if len(res.Ignored) != 1 {
			t.Fatalf("ignored %v, want the unclosed tag", res.Ignored)
		}
		if tag := res.Ignored[0].Tag; !utf8.ValidString(tag) || !strings.HasSuffix(tag, "…") {
			t.Errorf("pad %d: the ignored tag %q is not UTF-8 cut with an ellipsis", pad, tag)
		}
	}
}
