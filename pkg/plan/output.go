package plan

import (
	"github.com/agentmesh/agentmesh/pkg/structjson"
	"google.golang.org/protobuf/types/known/structpb"
)

// OutputJSON is a step's structured output (StepProgress.output) as the model and the planner
// read it, and as its size is bounded: compact JSON with sorted keys; "" when there is none.
func OutputJSON(out *structpb.Struct) string {
	if len(out.GetFields()) == 0 {
		return ""
	}
	b, err := structjson.Marshal(out)
	if err != nil {
		return ""
	}
	return string(b)
}
