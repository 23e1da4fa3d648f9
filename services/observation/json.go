package observation

import (
	"encoding/json"
	"errors"
	"strings"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/protobuf/types/known/structpb"
)

// parseJSON returns raw as a Struct when it is a JSON object, and nil otherwise. When
// expectJSON is set, raw that is not valid JSON is a PARSE_ERROR saying where parsing failed.
func parseJSON(raw string, expectJSON bool) (*structpb.Struct, error) {
	if !expectJSON && !strings.HasPrefix(strings.TrimLeft(raw, " \t\r\n"), "{") {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		if !expectJSON {
			return nil, nil
		}
		return nil, parseError(err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, nil
	}
	st, err := structpb.NewStruct(obj)
	if err != nil {
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PARSE_ERROR, "tool output cannot be represented as a struct: %v", err)
	}
	return st, nil
}

func parseError(err error) error {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PARSE_ERROR,
			"tool output is not valid JSON: %v (at byte %d)", syntax, syntax.Offset)
	}
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PARSE_ERROR, "tool output is not valid JSON: %v", err)
}
