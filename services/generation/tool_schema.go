package generation

import (
	"encoding/json"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/structjson"
)

// emptySchema is the input schema of a tool that declares none.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// toolSchema is a tool's input schema as compact JSON with sorted keys, or emptySchema.
func toolSchema(t *typev1.Tool) json.RawMessage {
	if s := t.GetInputSchema(); s != nil {
		if data, err := structjson.Marshal(s); err == nil {
			return data
		}
	}
	return emptySchema
}
