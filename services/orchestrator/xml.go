package orchestrator

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/jsonrepair"
	"github.com/agentmesh/agentmesh/pkg/structjson"
	"github.com/agentmesh/agentmesh/pkg/xmltransport"
	"google.golang.org/protobuf/types/known/structpb"
)

// FinalReportXMLCommand is the accounting command of a final report written in the XML final
// slot (seed 000 §11).
const FinalReportXMLCommand = "agent__final_report_xml"

// Accounting sources: how a tool call travelled.
const (
	sourceNative = "native"
	sourceXML    = "xml"
)

// transportMode is the contract's tool transport.
func transportMode(c *typev1.ExecutionContract) xmltransport.Mode {
	switch c.GetToolTransport() {
	case typev1.ToolTransport_TOOL_TRANSPORT_XML_FINAL:
		return xmltransport.ModeXMLFinal
	case typev1.ToolTransport_TOOL_TRANSPORT_XML:
		return xmltransport.ModeXML
	}
	return xmltransport.ModeNative
}

// providerTools are the tool definitions sent to the provider: none in xml mode, where XML is
// the only invocation path and XML-NEXT lists the tools.
func (r *run) providerTools(tools []*typev1.Tool) []*typev1.Tool {
	if r.xml != nil && !r.xml.Mode.ProviderTools() {
		return nil
	}
	return tools
}

// xmlNext is the turn's ephemeral XML-NEXT message (nil in native mode): the slots from the
// session's next unused one, the tools of the turn (xml mode), the final slot with the
// expected format, only the final slot in a final turn; preceded by the tags of the previous
// answer that were ignored, so the model can correct them. It is sent last and never stored.
func (r *run) xmlNext(tools []*typev1.Tool) *typev1.Message {
	if r.xml == nil {
		return nil
	}
	opts := xmltransport.NextOptions{
		Tools:       tools,
		MaxCalls:    int(r.contract.GetMaxToolCallsPerTurn()),
		Format:      formatName(r.contract.GetOutputFormat()),
		ForcedFinal: r.finalReason() != "",
	}
	if s := r.req.GetOutputSchema(); s != nil && r.contract.GetOutputFormat() == typev1.OutputFormat_OUTPUT_FORMAT_JSON {
		b, _ := structjson.Marshal(s)
		opts.FormatSchema = string(b)
	}
	var b strings.Builder
	if len(r.xmlIgnored) > 0 {
		b.WriteString("System Notice: these tags of your last answer were ignored:\n")
		for _, ig := range r.xmlIgnored {
			fmt.Fprintf(&b, "- %s: %s\n", ig.Tag, ig.Reason)
		}
		b.WriteString("\n")
	}
	r.xmlIgnored = nil // told once
	b.WriteString(r.xml.RenderNext(opts))
	return &typev1.Message{Role: typev1.Role_ROLE_USER, Content: b.String()}
}

// incompleteNotice is the ephemeral retry message after a final report cut off by the output
// token limit.
func (r *run) incompleteNotice(stopReason string) *typev1.Message {
	return &typev1.Message{Role: typev1.Role_ROLE_USER, Content: fmt.Sprintf(
		"System notice: your final report was cut off before its closing tag </ai-agent-%s> (stop reason %s). "+
			"Write the complete final report again, more concisely if needed, and close the tag.",
		r.xml.FinalSlot(), stopReason)}
}

// readXML parses an answer's content with the run's session. Numbered slots are tool calls only
// in xml mode and outside a final turn, and the progress slot exists in xml mode only;
// otherwise they are ignored (and the numbered ones use no slot).
func (r *run) readXML(content, stopReason string, finalTurn bool) xmltransport.Result {
	res := xmltransport.Parse(content, r.xml.Nonce, r.xml.NextSlot, stopReason)
	why := ""
	switch {
	case !r.xml.Mode.XMLTools():
		why = "tools are called natively in " + string(r.xml.Mode) + " mode"
	case finalTurn:
		why = "no tools are available in the final turn"
	}
	if why != "" && len(res.Calls) > 0 {
		for _, c := range res.Calls {
			res.Ignored = append(res.Ignored, xmltransport.Ignored{Tag: c.Slot + " (" + c.Tool + ")", Reason: why})
		}
		res.Calls, res.NextSlot = nil, r.xml.NextSlot
	}
	if p := res.Progress; p != nil && !r.xml.Mode.Progress() {
		res.Ignored = append(res.Ignored, xmltransport.Ignored{Tag: p.Slot, Reason: "there is no progress slot in " + string(r.xml.Mode) + " mode"})
		res.Progress = nil
	}
	return res
}

// usedTags reports whether the answer wrote transport tags, valid or not: such an answer is
// not a plain text final answer.
func usedTags(res *xmltransport.Result) bool {
	return res != nil && (len(res.Calls) > 0 || res.Final != nil || res.Progress != nil || len(res.Ignored) > 0)
}

// xmlCalls turns the answer's valid numbered slots into tool calls (ids are the slot ids) that
// go through the same validation, approval, execution and budgets as native calls. Arguments
// are parsed like native ones (strict mode: valid JSON objects only; else repaired); a call
// whose arguments cannot be used keeps them raw and has nil arguments. It returns the
// repairs made, for the transcript.
func (r *run) xmlCalls(res *xmltransport.Result) ([]askedCall, []string) {
	var (
		calls []askedCall
		notes []string
	)
	for _, c := range res.Calls {
		call := &typev1.ToolCall{Id: c.Slot, Name: c.Tool, RawArguments: c.Payload}
		args, steps, err := xmlArguments(c.Payload, r.toolSchema(c.Tool), r.contract.GetStrictMode())
		if err == nil {
			call.Arguments = args
		}
		for _, s := range steps {
			notes = append(notes, fmt.Sprintf("%s (%s) arguments repaired: %s", c.Slot, c.Tool, s))
		}
		calls = append(calls, askedCall{call: call, xml: true})
	}
	return calls, notes
}

// toolSchema is the input schema of an offered tool, or nil.
func (r *run) toolSchema(name string) map[string]any {
	for _, t := range r.offered {
		if t.GetName() == name && t.GetInputSchema() != nil {
			return t.GetInputSchema().AsMap()
		}
	}
	return nil
}

// xmlArguments parses the JSON arguments written in a slot; empty text is the empty object.
func xmlArguments(payload string, schema map[string]any, strict bool) (*structpb.Struct, []string, error) {
	text := strings.TrimSpace(payload)
	if text == "" {
		return &structpb.Struct{Fields: map[string]*structpb.Value{}}, nil, nil
	}
	var (
		value any
		steps []string
	)
	if strict {
		if err := json.Unmarshal([]byte(text), &value); err != nil {
			return nil, nil, err
		}
	} else {
		res, err := jsonrepair.ParseObject(text)
		if err != nil {
			return nil, nil, err
		}
		value, steps = res.Value, res.Steps
		if schema != nil {
			if expanded, nested := jsonrepair.ExpandNested(value, schema); len(nested) > 0 {
				value, steps = expanded, append(steps, nested...)
			}
		}
	}
	obj, ok := value.(map[string]any)
	if !ok {
		return nil, steps, fmt.Errorf("a JSON %s, not an object", jsonrepair.Kind(value))
	}
	args, err := structpb.NewStruct(obj)
	return args, steps, err
}

// takeXMLReport accepts or refuses the final report of the XML final slot and accounts it as
// agent__final_report_xml. A refusal is answered to the model like a tool failure, so it can
// fix the report in the (single) turn that remains.
func (r *run) takeXMLReport(f *xmltransport.Final, t *turnState) (refusal *plannedCall, note string) {
	want := formatName(r.contract.GetOutputFormat())
	if f.Format != "" && f.Format != want {
		note = fmt.Sprintf("final report format %q normalised to %q", f.Format, want)
	}
	if !f.Closed {
		note = strings.TrimPrefix(note+"; final report accepted without its closing tag", "; ")
	}
	entry := &typev1.AccountingEntry{
		Type: typev1.AccountingType_ACCOUNTING_TYPE_TOOL, Server: "orchestrator", Command: FinalReportXMLCommand,
		Status: typev1.AccountingStatus_ACCOUNTING_STATUS_OK, CharactersIn: int64(len(f.Payload)), Source: sourceXML,
	}
	rep, err := reportFromXML(r.contract, r.outputSchema, f.Payload)
	if err != nil {
		entry.Status, entry.Error = typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED, err.Error()
		r.account(entry)
		t.report, t.reportErr = nil, err
		call := &typev1.ToolCall{Id: f.Slot, Name: xmltransport.FinalReportTool, RawArguments: f.Payload}
		return &plannedCall{call: call, xml: true, refusal: "(tool failed: " + xmltransport.FinalReportTool + ": " + err.Error() + ")"}, note
	}
	entry.CharactersOut = int64(len(rep.content))
	r.account(entry)
	t.report, t.reportErr = rep, nil
	return nil, note
}

// reportFromXML is layers 2 and 3 of seed 000 §11: the raw payload of the final slot processed
// by the expected format (json is parsed and validated against the output schema, other
// formats keep the raw text) into a clean report; transport metadata never enters it.
func reportFromXML(c *typev1.ExecutionContract, schema *outputSchema, payload string) (*report, error) {
	if c.GetOutputFormat() != typev1.OutputFormat_OUTPUT_FORMAT_JSON {
		return &report{content: payload}, nil
	}
	text := stripFence(payload)
	var value any
	if err := json.Unmarshal([]byte(text), &value); err != nil {
		return nil, fmt.Errorf("the final report must be a JSON object: %v", err)
	}
	obj, err := validateJSON(c, schema, value)
	if err != nil {
		return nil, err
	}
	return &report{content: text, json: obj}, nil
}

// pastResponse is one entry of the XML-PAST message.
func pastResponse(call *typev1.ToolCall, content string, ok bool, ms int64) xmltransport.ToolResponse {
	status := "failed"
	if ok {
		status = "ok"
	}
	return xmltransport.ToolResponse{
		Slot: call.GetId(), Tool: call.GetName(), Status: status, Duration: time.Duration(ms) * time.Millisecond,
		Request: call.GetRawArguments(), Response: content,
	}
}

// xmlNotes are the transcript notes of an answer's transport tags.
func xmlNotes(res *xmltransport.Result) []string {
	var notes []string
	for _, ig := range res.Ignored {
		notes = append(notes, "ignored "+ig.Tag+": "+ig.Reason)
	}
	if res.Progress != nil {
		notes = append(notes, "progress: "+res.Progress.Payload)
	}
	return notes
}
