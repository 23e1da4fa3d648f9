package generation

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// adapt turns a provider answer into the canonical GenerateResponse: tool-call arguments are
// parsed and, unless strict, repaired; every repair and rejection is listed in repairs.
func adapt(raw *Response, strict bool, log *slog.Logger) *generationv1.GenerateResponse {
	resp := &generationv1.GenerateResponse{
		Content:       raw.Content,
		Reasoning:     raw.Reasoning,
		Usage:         raw.Usage.proto(),
		StopReason:    raw.FinishReason,
		Model:         raw.Model,
		AdapterStatus: generationv1.AdapterStatus_ADAPTER_STATUS_NATIVE,
	}
	rejected := false
	for _, call := range raw.ToolCalls {
		tc, parsed := adaptCall(call, strict)
		resp.ToolCalls = append(resp.ToolCalls, tc)
		label := fmt.Sprintf("tool call %s (%s)", tc.GetId(), tc.GetName())
		for _, step := range parsed.repairs {
			resp.Repairs = append(resp.Repairs, label+": "+step)
		}
		switch {
		case parsed.rejection != "":
			rejected = true
			resp.Repairs = append(resp.Repairs, label+": rejected: "+parsed.rejection)
			log.Error("tool call rejected", "call_id", tc.GetId(), "tool", tc.GetName(),
				"reason", parsed.rejection, "raw_arguments", call.Arguments)
		case len(parsed.repairs) > 0:
			log.Warn("tool call arguments repaired", "call_id", tc.GetId(), "tool", tc.GetName(),
				"steps", parsed.repairs, "original", call.Arguments, "repaired", parsed.repaired)
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

// parsedArguments is the outcome of parsing one call's arguments.
type parsedArguments struct {
	args      *structpb.Struct
	repairs   []string
	repaired  string
	rejection string
}

// adaptCall builds the canonical tool call; a call that cannot be used keeps its raw
// arguments and has nil arguments.
func adaptCall(call ToolCall, strict bool) (*typev1.ToolCall, parsedArguments) {
	tc := &typev1.ToolCall{Id: call.ID, Name: call.Name, RawArguments: call.Arguments}
	if tc.Id == "" {
		tc.Id = newCallID()
	}
	parsed := parseArguments(call.Arguments, strict)
	if call.Name == "" && parsed.rejection == "" {
		parsed.rejection = "the tool call has no name"
	}
	if parsed.rejection == "" {
		tc.Arguments = parsed.args
	}
	return tc, parsed
}

// parseArguments parses raw arguments into an object, repairing them unless strict. An
// empty text is the empty object.
func parseArguments(raw string, strict bool) parsedArguments {
	text := strings.TrimSpace(raw)
	if text == "" {
		return parsedArguments{args: &structpb.Struct{Fields: map[string]*structpb.Value{}}}
	}
	args, kind, err := decodeObject(text)
	if err == nil {
		return parsedArguments{args: args}
	}
	if kind == "string" && !strict {
		var inner string
		if json.Unmarshal([]byte(text), &inner) == nil {
			if args, _, err := decodeObject(inner); err == nil {
				return parsedArguments{args: args, repaired: inner,
					repairs: []string{"decoded arguments sent as a JSON string"}}
			}
		}
	}
	if kind != "" {
		return parsedArguments{rejection: fmt.Sprintf("arguments are a JSON %s, not an object", kind)}
	}
	if strict {
		return parsedArguments{rejection: fmt.Sprintf("arguments are not valid JSON (%v); strict mode allows no repair", err)}
	}
	fixed, steps := repairJSON(text)
	if len(steps) == 0 {
		return parsedArguments{rejection: fmt.Sprintf("arguments are not valid JSON (%v) and could not be repaired", err)}
	}
	args, kind, err2 := decodeObject(fixed)
	switch {
	case err2 == nil:
		return parsedArguments{args: args, repairs: steps, repaired: fixed}
	case kind != "":
		return parsedArguments{repairs: steps, rejection: fmt.Sprintf("repaired arguments are a JSON %s, not an object", kind)}
	default:
		return parsedArguments{repairs: steps,
			rejection: fmt.Sprintf("arguments are not valid JSON (%v) and still not after repair (%v)", err, err2)}
	}
}

// decodeObject parses text as a JSON object. When text is valid JSON of another kind, kind
// names it and err is set; when text is not JSON, kind is "".
func decodeObject(text string) (*structpb.Struct, string, error) {
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return nil, "", err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		kind := jsonKind(v)
		return nil, kind, fmt.Errorf("a JSON %s is not an object", kind)
	}
	s, err := structpb.NewStruct(obj)
	return s, "", err
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "value"
}

// newCallID makes an identifier for a tool call the provider left without one.
func newCallID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}
