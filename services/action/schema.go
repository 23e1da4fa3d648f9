package action

import (
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/schema"
	"google.golang.org/protobuf/types/known/structpb"
)

// compileSchema compiles a tool's argument schema once, at construction. A schema that does not
// compile is an error wrapping exitcode.Schema: seed 000's exit code of a schema validation
// failure, "e.g., tool schema validation".
func compileSchema(name string, s *structpb.Struct) (*schema.Schema, error) {
	compiled, err := schema.Compile("tool:///arguments.json", s.AsMap())
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Schema, fmt.Errorf("tool %q: schema: %w", name, err))
	}
	return compiled, nil
}
