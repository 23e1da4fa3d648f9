package orchestrator

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/jsonrepair"
	"github.com/agentmesh/agentmesh/pkg/schema"
	"github.com/agentmesh/agentmesh/pkg/structjson"
	"github.com/agentmesh/agentmesh/pkg/toolname"
	"github.com/agentmesh/agentmesh/pkg/toolwire"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// FinalReportTool is the tool the model finishes a json run with (seed 000 §5). The
// orchestrator handles it itself: it is never sent to the action stage and never counts as an
// executed tool.
const FinalReportTool = toolname.FinalReport

// plainReportTools are the FinalReportTool of the runs without an output schema, by output
// format: built once and shared, so an in-flight run does not hold a schema of its own
// (issue 15). Nobody may change them.
var plainReportTools sync.Map // typev1.OutputFormat → *typev1.Tool

// finalReportTool describes FinalReportTool for a run; content_json carries the run's
// output schema.
func finalReportTool(c *typev1.ExecutionContract, outputSchema *structpb.Struct) *typev1.Tool {
	format := c.GetOutputFormat()
	if outputSchema != nil {
		return newFinalReportTool(format, outputSchema.AsMap())
	}
	if t, ok := plainReportTools.Load(format); ok {
		return t.(*typev1.Tool)
	}
	t, _ := plainReportTools.LoadOrStore(format, newFinalReportTool(format, map[string]any{"type": "object", "description": "The answer, matching the required schema."}))
	return t.(*typev1.Tool)
}

// newFinalReportTool builds FinalReportTool for the output format, content being the schema of
// content_json.
func newFinalReportTool(format typev1.OutputFormat, content map[string]any) *typev1.Tool {
	schema, _ := structpb.NewStruct(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"report_format":  map[string]any{"type": "string", "const": formatName(format)},
			"report_content": map[string]any{"type": "string", "description": "The answer as text (or JSON text)."},
			"content_json":   content,
			"encoding":       map[string]any{"type": "string", "enum": []any{encodingRaw, encodingBase64}},
			"metadata":       map[string]any{"type": "object"},
		},
		"required": []any{"report_format"},
	})
	t := &typev1.Tool{
		Name:        FinalReportTool,
		Description: "Finish the task: give your final answer. Call it once, when you have everything you need.",
		InputSchema: schema,
		Server:      "orchestrator",
	}
	toolwire.Share(t) // never changed: sent with every request as one encoding
	return t
}

func formatName(f typev1.OutputFormat) string {
	if f == typev1.OutputFormat_OUTPUT_FORMAT_UNSPECIFIED {
		return "text"
	}
	return strings.ToLower(strings.TrimPrefix(f.String(), "OUTPUT_FORMAT_"))
}

// report is an accepted final answer.
type report struct {
	content  string
	json     *structpb.Struct
	metadata *structpb.Struct
}

// reportFromCall decodes and validates a final_report call. Its error says what is wrong, so
// the model can be told. For the json format without content_json, report_content is the JSON,
// in a Markdown code fence or not, as a text answer's (reportFromText).
func reportFromCall(c *typev1.ExecutionContract, schema *outputSchema, call *typev1.ToolCall) (*report, error) {
	args := call.GetArguments().GetFields()
	if call.GetArguments() == nil {
		return nil, errors.New(unusableArguments(call.GetRawArguments()))
	}
	if kind := nonString(args["report_content"]); kind != "" {
		why := "report_content must be a string, got " + kind
		if kind == "an object" && c.GetOutputFormat() == typev1.OutputFormat_OUTPUT_FORMAT_JSON {
			why += "; give the JSON object as content_json"
		}
		return nil, errors.New(why)
	}
	content := args["report_content"].GetStringValue()
	enc, err := reportEncoding(args["encoding"])
	if err != nil {
		return nil, err
	}
	if enc == encodingBase64 {
		decoded, err := base64.StdEncoding.DecodeString(content)
		if err != nil {
			return nil, fmt.Errorf("report_content is not valid base64: %v", err)
		}
		// Bytes that are no text cannot be the report: a protobuf string holds UTF-8 only.
		if !utf8.Valid(decoded) {
			return nil, errors.New("report_content decoded from base64 is not UTF-8 text")
		}
		content = string(decoded)
	}
	rep := &report{content: content, metadata: args["metadata"].GetStructValue()}
	if c.GetOutputFormat() != typev1.OutputFormat_OUTPUT_FORMAT_JSON {
		if strings.TrimSpace(content) == "" {
			return nil, fmt.Errorf("report_content is empty")
		}
		return rep, nil
	}
	value := any(nil)
	if v, ok := args["content_json"]; ok {
		value = v.AsInterface()
	} else if err := json.Unmarshal([]byte(stripFence(content)), &value); err != nil {
		return nil, fmt.Errorf("content_json is missing and report_content is not JSON: %v", err)
	}
	obj, err := validateJSON(c, schema, value)
	if err != nil {
		return nil, err
	}
	rep.json = obj
	if rep.content == "" {
		b, _ := structjson.Marshal(obj)
		rep.content = string(b)
	}
	return rep, nil
}

// nonString names the kind of a value that is neither a string nor null nor absent ("an
// object", "an array", "a number", "a boolean"), or is "".
func nonString(v *structpb.Value) string {
	switch v.GetKind().(type) {
	case *structpb.Value_StructValue:
		return "an object"
	case *structpb.Value_ListValue:
		return "an array"
	case *structpb.Value_NumberValue:
		return "a number"
	case *structpb.Value_BoolValue:
		return "a boolean"
	}
	return ""
}

// Encodings of a final report's report_content (seed 000 §1).
const (
	encodingRaw    = "raw"
	encodingBase64 = "base64"
)

// reportEncoding is the encoding argument of a final_report call: raw when it is absent, null
// or empty, raw or base64 as given, else an error that says what it is. An unknown encoding
// is refused: taken as raw, the report would be the encoded text.
func reportEncoding(v *structpb.Value) (string, error) {
	switch k := v.GetKind().(type) {
	case nil, *structpb.Value_NullValue:
		return encodingRaw, nil
	case *structpb.Value_StringValue:
		switch k.StringValue {
		case "", encodingRaw:
			return encodingRaw, nil
		case encodingBase64:
			return encodingBase64, nil
		}
		return "", fmt.Errorf("encoding must be raw or base64, got %q", k.StringValue)
	}
	b, _ := protojson.Marshal(v)
	return "", fmt.Errorf("encoding must be raw or base64, got %s", b)
}

// reportFromText accepts a plain text answer as the final report; for the json format the
// text must be a JSON object that satisfies the output schema.
func reportFromText(c *typev1.ExecutionContract, schema *outputSchema, text string) (*report, error) {
	if c.GetOutputFormat() != typev1.OutputFormat_OUTPUT_FORMAT_JSON {
		return &report{content: text}, nil
	}
	var value any
	if err := json.Unmarshal([]byte(stripFence(text)), &value); err != nil {
		return nil, fmt.Errorf("the answer must be a JSON object (call %s with content_json): %v", FinalReportTool, err)
	}
	obj, err := validateJSON(c, schema, value)
	if err != nil {
		return nil, err
	}
	return &report{content: text, json: obj}, nil
}

// outputSchema is a run's output schema, compiled once, and as decoded JSON for repairs.
type outputSchema struct {
	compiled *schema.Schema
	raw      map[string]any
}

// compileOutputSchema compiles a run's output schema; nil stays nil.
func compileOutputSchema(s *structpb.Struct) (*outputSchema, error) {
	if s == nil {
		return nil, nil
	}
	raw := s.AsMap()
	compiled, err := schema.Compile("run:///output_schema.json", raw)
	if err != nil {
		return nil, err
	}
	return &outputSchema{compiled: compiled, raw: raw}, nil
}

// validateJSON checks value against the output schema; on failure it expands fields that hold
// stringified JSON where the schema wants an object or array (seed 000 §1's repair loop for
// content_json) and checks again, unless the contract is strict (seed 001: strict_mode
// disables recovery, as it does for tool arguments).
func validateJSON(c *typev1.ExecutionContract, out *outputSchema, value any) (*structpb.Struct, error) {
	obj, ok := value.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("content_json must be a JSON object, got %T", value)
	}
	if out != nil {
		if err := out.compiled.Validate(obj); err != nil {
			if c.GetStrictMode() {
				return nil, fmt.Errorf("content_json does not match the output schema (strict mode allows no repair): %v", err)
			}
			expanded, steps := jsonrepair.ExpandNested(obj, out.raw)
			repaired, isObject := expanded.(map[string]any)
			if len(steps) == 0 || !isObject || out.compiled.Validate(repaired) != nil {
				return nil, fmt.Errorf("content_json does not match the output schema: %v", err)
			}
			obj = repaired
		}
	}
	s, err := structpb.NewStruct(obj)
	if err != nil {
		return nil, fmt.Errorf("content_json: %v", err)
	}
	return s, nil
}

func stripFence(s string) string {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "```") {
		return s
	}
	s = strings.TrimPrefix(s, "```")
	s = strings.TrimPrefix(s, "json")
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "```"))
}
