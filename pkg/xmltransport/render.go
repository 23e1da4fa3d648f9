package xmltransport

import (
	"fmt"
	"strings"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/structjson"
)

// NextOptions is what one turn's XML-NEXT message advertises.
type NextOptions struct {
	// Tools are the tools the model may call through numbered slots; they are listed only in
	// xml mode, and not in a forced-final turn.
	Tools []*typev1.Tool
	// MaxCalls is the number of numbered slots offered (the turn's tool-call limit); values
	// below 1 offer one slot.
	MaxCalls int
	// Format is the expected output format of the final report, e.g. "markdown" or "json".
	Format string
	// FormatSchema, when set, is the JSON schema the final report must follow (json format).
	FormatSchema string
	// ForcedFinal hides the tools and numbered slots: the model must write its final report.
	ForcedFinal bool
}

// RenderNext writes the XML-NEXT message of a turn: the nonce, then (xml mode, not forced
// final) the tools with their JSON schemas and the numbered slot templates from NextSlot,
// the progress slot (xml mode), and the final-report slot with its format. The message is
// ephemeral: send it as the last user message of this turn and do not store it.
func (s *Session) RenderNext(opts NextOptions) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# System Notice: XML transport for this turn\n\n")
	fmt.Fprintf(&b, "Session nonce: %s. Only tags with this nonce and an unused slot id are read; text outside the tags is not executed.\n", s.Nonce)
	if opts.ForcedFinal {
		b.WriteString("\nThis is the final turn: no tools are available. Write your final report now.\n")
	}
	if s.Mode.XMLTools() && !opts.ForcedFinal && len(opts.Tools) > 0 {
		s.renderTools(&b, opts)
	}
	if s.Mode.Progress() {
		slot := s.ProgressSlot()
		fmt.Fprintf(&b, "\n## Progress (optional)\n\nTell the user what you are doing in one short sentence:\n%s%s%s\n",
			openTag(slot, ProgressTool, ""), "one short sentence", closeTag(slot))
	}
	slot := s.FinalSlot()
	format := opts.Format
	if format == "" {
		format = "text"
	}
	fmt.Fprintf(&b, "\n## Final report\n\nWhen you have the answer, write the complete final report in %s format in the final slot; the system decides its status:\n", format)
	fmt.Fprintf(&b, "%s\nthe complete final report\n%s\n", openTag(slot, FinalReportTool, format), closeTag(slot))
	if opts.FormatSchema != "" {
		fmt.Fprintf(&b, "\nThe report must follow this JSON schema:\n%s\n", opts.FormatSchema)
	}
	return b.String()
}

// renderTools writes the numbered slot templates and the tool list.
func (s *Session) renderTools(b *strings.Builder, opts NextOptions) {
	n := max(opts.MaxCalls, 1)
	first := s.Slot(s.NextSlot)
	b.WriteString("\n## Tools\n\nCall a tool by writing its JSON arguments inside a numbered slot, one call per slot:\n")
	fmt.Fprintf(b, "%s{\"argument\": \"value\"}%s\n\n", openTag(first, "TOOL_NAME", ""), closeTag(first))
	slots := make([]string, 0, n)
	for i := range n {
		slots = append(slots, s.Slot(s.NextSlot+i))
	}
	fmt.Fprintf(b, "Slots for this turn: %s.\n", strings.Join(slots, ", "))
	for _, t := range opts.Tools {
		fmt.Fprintf(b, "\n### %s\n", t.GetName())
		if d := strings.TrimSpace(t.GetDescription()); d != "" {
			fmt.Fprintf(b, "%s\n", d)
		}
		fmt.Fprintf(b, "Input schema: %s\n", schemaJSON(t))
	}
}

// schemaJSON is a tool's input schema as compact JSON with sorted keys.
func schemaJSON(t *typev1.Tool) string {
	if t.GetInputSchema() == nil {
		return `{"type":"object","properties":{}}`
	}
	data, err := structjson.Marshal(t.GetInputSchema())
	if err != nil {
		return `{"type":"object"}`
	}
	return string(data)
}

// ToolResponse is the outcome of one tool executed from a slot.
type ToolResponse struct {
	// Slot is the slot id, e.g. "1a2b3c4d-0004".
	Slot string
	// Tool is the tool name.
	Tool string
	// Status is "ok" or "failed".
	Status string
	// Duration is how long the tool ran.
	Duration time.Duration
	// Request is the payload the model wrote in the slot.
	Request string
	// Response is the tool's response (or failure message) as the model should read it.
	Response string
}

// RenderToolResponse writes one tool response as a user message:
// "System Notice: tool response for NONCE-000X (toolName)", the status and duration, then
// the request and response blocks.
func RenderToolResponse(r ToolResponse) string {
	var b strings.Builder
	fmt.Fprintf(&b, "System Notice: tool response for %s (%s)\n", r.Slot, r.Tool)
	fmt.Fprintf(&b, "status: %s, duration: %s\n", r.Status, r.Duration.Round(time.Millisecond))
	fmt.Fprintf(&b, "--- request ---\n%s\n", strings.TrimSpace(r.Request))
	fmt.Fprintf(&b, "--- response ---\n%s\n", strings.TrimRight(r.Response, "\n"))
	b.WriteString("--- end of tool response ---\n")
	return b.String()
}

// RenderPast writes the XML-PAST message: the tool responses of the previous turn, in slot
// order as given, separated by blank lines; "" when there are none. The message is
// permanent: store it as a user message of the conversation.
func RenderPast(responses []ToolResponse) string {
	parts := make([]string, 0, len(responses))
	for _, r := range responses {
		parts = append(parts, RenderToolResponse(r))
	}
	return strings.Join(parts, "\n")
}
