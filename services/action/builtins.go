package action

import (
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// builtinTools returns the tools that run inside the service; knowledge_search only when a
// memory client is configured.
func builtinTools(memory memoryv1.MemoryServiceClient, now func() time.Time) ([]Tool, error) {
	clock, err := newClockTool(now)
	if err != nil {
		return nil, err
	}
	calc, err := newCalculatorTool()
	if err != nil {
		return nil, err
	}
	tools := []Tool{clock, calc}
	if memory != nil {
		search, err := newKnowledgeTool(memory)
		if err != nil {
			return nil, err
		}
		tools = append(tools, search)
	}
	return tools, nil
}

// objectSchema returns the JSON schema of an object with the given properties, of which
// required must be present, and no others.
func objectSchema(properties map[string]any, required ...string) (*structpb.Struct, error) {
	schema := map[string]any{
		"type":                 "object",
		"properties":           properties,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		req := make([]any, len(required))
		for i, name := range required {
			req[i] = name
		}
		schema["required"] = req
	}
	return structpb.NewStruct(schema)
}
