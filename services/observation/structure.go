package observation

import (
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"

	observationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/observation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/schema"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/protobuf/types/known/structpb"
)

// KnowledgeSearchTool is the action stage's built-in search of the user's knowledge base,
// whose references the observation parses.
const KnowledgeSearchTool = "knowledge_search"

// emptySearchResult is knowledge_search's whole result when nothing matches (seed 002).
const emptySearchResult = "DOCUMENTATION_SEARCH_RESULT: EMPTY"

// maxStructuredDepth is how deeply a result's arrays and objects may nest for it to be
// structured: a Struct takes two messages a level of arrays and three a level of objects, and
// gRPC does not decode a message nested over 10,000 deep (its caller would get INTERNAL
// instead of the observation).
const maxStructuredDepth = 1000

// structure returns the structure of a successful result: a JSON object as it is, a JSON
// array as {"items": [...]}, knowledge_search's references as {"references": [...], "empty":
// bool}, and nil for anything else, a result nested deeper than maxStructuredDepth included.
// A result the request requires to be JSON (expect_json, or output_schema, compiled as output,
// which it must also match) that is not is a PARSE_ERROR saying why.
func structure(req *observationv1.ObserveRequest, output *schema.Schema) (*structpb.Struct, error) {
	raw := req.GetRawResult()
	if req.GetToolName() == KnowledgeSearchTool {
		return references(raw), nil
	}
	mustParse := req.GetExpectJson() || output != nil
	if !mustParse && !looksLikeJSON(raw) {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		if !mustParse {
			return nil, nil
		}
		return nil, parseError(err)
	}
	if output != nil {
		if err := output.Validate(v); err != nil {
			return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PARSE_ERROR,
				"tool output does not match the output schema of %s: %s", req.GetToolName(), schema.Message(err))
		}
	}
	if depth(v) > maxStructuredDepth {
		return nil, nil
	}
	var st *structpb.Struct
	var err error
	switch v := v.(type) {
	case map[string]any:
		st, err = structpb.NewStruct(v)
	case []any:
		st, err = structpb.NewStruct(map[string]any{"items": v})
	default:
		return nil, nil
	}
	if err != nil {
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PARSE_ERROR, "tool output cannot be represented as a struct: %v", err)
	}
	return st, nil
}

// depth is how deeply v nests arrays and objects: 0 for a scalar, 1 for a flat array or object.
func depth(v any) int {
	d := 0
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			d = max(d, depth(e))
		}
	case map[string]any:
		for _, e := range v {
			d = max(d, depth(e))
		}
	default:
		return 0
	}
	return d + 1
}

// looksLikeJSON reports whether raw starts like a JSON object or array.
func looksLikeJSON(raw string) bool {
	trimmed := strings.TrimLeft(raw, " \t\r\n")
	return strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "[")
}

func parseError(err error) error {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PARSE_ERROR,
			"tool output is not valid JSON: %v (at byte %d)", syntax, syntax.Offset)
	}
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PARSE_ERROR, "tool output is not valid JSON: %v", err)
}

// referenceHead is the first line of one knowledge_search reference: "[n] label (score s)".
var referenceHead = regexp.MustCompile(`(?m)^\[(\d+)\] (.*) \(score (\d+(?:\.\d+)?)\)$`)

// sourceSeparator parts a reference's title from the file it comes from in its label ("Retry
// policy — ops/retry.md").
const sourceSeparator = " — "

// references parses knowledge_search's result, references "[n] label (score s)\ntext" joined
// by blank lines, into {"references": [{"n", "title", "score", "text"}], "empty": bool}, with
// a reference's "source" when its label names a title and the file: "title — file" (the title
// is the label's part before the last separator; a label that is a file alone is the title).
// The empty sentinel has no references. Output in another form has no structure (nil).
func references(raw string) *structpb.Struct {
	if strings.TrimSpace(raw) == emptySearchResult {
		st, _ := structpb.NewStruct(map[string]any{"references": []any{}, "empty": true})
		return st
	}
	heads := referenceHead.FindAllStringSubmatchIndex(raw, -1)
	if len(heads) == 0 || heads[0][0] != 0 {
		return nil
	}
	refs := make([]any, len(heads))
	for i, h := range heads {
		end := len(raw)
		if i+1 < len(heads) {
			end = heads[i+1][0]
		}
		n, _ := strconv.Atoi(raw[h[2]:h[3]])
		score, _ := strconv.ParseFloat(raw[h[6]:h[7]], 64)
		ref := map[string]any{
			"n": float64(n), "title": raw[h[4]:h[5]], "score": score,
			"text": strings.TrimSpace(strings.TrimPrefix(raw[h[1]:end], "\n")),
		}
		if title, source, ok := cutLast(raw[h[4]:h[5]], sourceSeparator); ok {
			ref["title"], ref["source"] = title, source
		}
		refs[i] = ref
	}
	st, err := structpb.NewStruct(map[string]any{"references": refs, "empty": false})
	if err != nil {
		return nil
	}
	return st
}

// cutLast slices s around the last instance of sep, as strings.Cut does around the first.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}
