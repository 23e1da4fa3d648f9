package action

import (
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/schema"
	"google.golang.org/protobuf/types/known/structpb"
)

// compileSchema compiles a tool's argument schema once, at construction.
func compileSchema(name string, s *structpb.Struct) (*schema.Schema, error) {
	compiled, err := schema.Compile("tool:///arguments.json", s.AsMap())
	if err != nil {
		return nil, fmt.Errorf("tool %q: schema: %w", name, err)
	}
	return compiled, nil
}
