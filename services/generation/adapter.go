package generation

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/jsonrepair"
	"google.golang.org/protobuf/types/known/structpb"
)

// adapt turns a provider answer into the canonical GenerateResponse: tool-call arguments are
// parsed and, unless strict, repaired (with the input schema of the offered tool a call names,
// guiding the parsing of stringified nested JSON); every repair and rejection is listed
// in repairs. In an answer cut off at the output token limit, the last call is rejected when
// its arguments are not complete JSON: repairing them would run the tool with arguments the
// model never finished.
func adapt(raw *Response, offered toolSet, strict bool, log *slog.Logger) *generationv1.GenerateResponse {
	resp := &generationv1.GenerateResponse{
		Content:        raw.Content,
		Reasoning:      raw.Reasoning,
		ReasoningState: raw.ReasoningState,
		Usage:          raw.Usage.proto(),
		StopReason:     raw.FinishReason,
		Model:          raw.Model,
		AdapterStatus:  generationv1.AdapterStatus_ADAPTER_STATUS_NATIVE,
	}
	rejected := false
	for i, call := range raw.ToolCalls {
		tc, parsed := adaptCall(call, offered.schema(call.Name), strict)
		if raw.FinishReason == "length" && i == len(raw.ToolCalls)-1 && !completeJSON(call.Arguments) {
			tc.Arguments = nil
			parsed.rejection = "the arguments were cut off at the output token limit (stop reason length)"
		}
		resp.ToolCalls = append(resp.ToolCalls, tc)
		label := fmt.Sprintf("tool call %s (%s)", tc.GetId(), tc.GetName())
		for _, step := range parsed.repairs {
			resp.Repairs = append(resp.Repairs, label+": "+step)
		}
		// The log names the call and its size, never its arguments: they hold whatever the
		// model put in them (a password it was told, a file's whole content), of any size.
		switch {
		case parsed.rejection != "":
			rejected = true
			resp.Repairs = append(resp.Repairs, label+": rejected: "+parsed.rejection)
			log.Error("tool call rejected", "call_id", tc.GetId(), "tool", tc.GetName(),
				"reason", parsed.rejection, "arguments_bytes", len(call.Arguments))
		case len(parsed.repairs) > 0:
			log.Warn("tool call arguments repaired", "call_id", tc.GetId(), "tool", tc.GetName(),
				"steps", parsed.repairs, "arguments_bytes", len(call.Arguments))
		}
	}
	switch {
	case rejected:
		resp.AdapterStatus = generationv1.AdapterStatus_ADAPTER_STATUS_REJECTED
	case len(resp.Repairs) > 0:
		resp.AdapterStatus = generationv1.AdapterStatus_ADAPTER_STATUS_RECOVERED
	}
	switch {
	case len(resp.ToolCalls) > 0:
		resp.Type = generationv1.ResponseType_RESPONSE_TYPE_TOOL_CALL
	case resp.Content != "" || resp.Reasoning != "":
		resp.Type = generationv1.ResponseType_RESPONSE_TYPE_MESSAGE
	default:
		resp.Type = generationv1.ResponseType_RESPONSE_TYPE_DONE
	}
	return resp
}

// completeJSON reports whether raw arguments are a whole JSON text (not a cut-off prefix of
// one, nor empty).
func completeJSON(raw string) bool {
	return strings.TrimSpace(raw) != "" && json.Valid([]byte(raw))
}

// parsedArguments is the outcome of parsing one call's arguments.
type parsedArguments struct {
	args      *structpb.Struct
	repairs   []string
	rejection string
}

// adaptCall builds the canonical tool call; a call that cannot be used keeps its raw
// arguments and has nil arguments. schema is the offered tool's input schema, or nil.
func adaptCall(call ToolCall, schema map[string]any, strict bool) (*typev1.ToolCall, parsedArguments) {
	tc := &typev1.ToolCall{Id: call.ID, Name: call.Name, RawArguments: call.Arguments}
	if tc.Id == "" {
		tc.Id = newCallID()
	}
	parsed := parseArguments(call.Arguments, schema, strict)
	if call.Name == "" && parsed.rejection == "" {
		parsed.rejection = "the tool call has no name"
	}
	if parsed.rejection == "" {
		tc.Arguments = parsed.args
	}
	return tc, parsed
}

// parseArguments parses raw arguments into an object. Strict mode takes valid JSON objects
// only. Otherwise the jsonrepair pipeline runs (native parse, then repair and re-parse, an
// object sent as a JSON string decoded), and string fields holding JSON where the tool's
// schema wants an object or array are parsed. An empty text is the empty object.
func parseArguments(raw string, schema map[string]any, strict bool) parsedArguments {
	text := strings.TrimSpace(raw)
	if text == "" {
		return parsedArguments{args: &structpb.Struct{Fields: map[string]*structpb.Value{}}}
	}
	if strict {
		return parseStrict(text)
	}
	res, err := jsonrepair.ParseObject(text)
	if err != nil {
		var je *jsonrepair.Error
		var tried []string
		if errors.As(err, &je) {
			tried = je.Steps
		}
		return parsedArguments{repairs: tried, rejection: "arguments are " + err.Error()}
	}
	value, steps := res.Value, res.Steps
	if schema != nil {
		expanded, nested := jsonrepair.ExpandNested(value, schema)
		if len(nested) > 0 {
			value, steps = expanded, append(steps, nested...)
		}
	}
	obj, _ := value.(map[string]any) // ParseObject and ExpandNested keep an object an object
	args, err := structpb.NewStruct(obj)
	if err != nil {
		return parsedArguments{repairs: steps, rejection: fmt.Sprintf("arguments cannot be represented: %v", err)}
	}
	if len(steps) == 0 {
		return parsedArguments{args: args}
	}
	return parsedArguments{args: args, repairs: steps}
}

// parseStrict accepts a valid JSON object only: strict mode allows no repair.
func parseStrict(text string) parsedArguments {
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return parsedArguments{rejection: fmt.Sprintf("arguments are not valid JSON (%v); strict mode allows no repair", err)}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return parsedArguments{rejection: fmt.Sprintf("arguments are a JSON %s, not an object; strict mode allows no repair", jsonrepair.Kind(v))}
	}
	args, err := structpb.NewStruct(obj)
	if err != nil {
		return parsedArguments{rejection: fmt.Sprintf("arguments cannot be represented: %v", err)}
	}
	return parsedArguments{args: args}
}

// newCallID makes an identifier for a tool call the provider left without one.
func newCallID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}
