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

// toolSchema is the input schema of req's i-th tool as JSON: ToolSchemas[i] when the service
// made it, else rendered from the tool (toolSchema).
func (req *Request) toolSchema(i int) json.RawMessage {
	if i < len(req.ToolSchemas) && req.ToolSchemas[i] != nil {
		return req.ToolSchemas[i]
	}
	return toolSchema(req.Tools[i])
}
