package assembly

import (
	"fmt"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// stepMessage returns the system message describing the current plan step and its source,
// or nil when there is no step.
func stepMessage(step *typev1.Step) (*typev1.Message, *typev1.Source) {
	if step == nil {
		return nil, nil
	}
	text := fmt.Sprintf("Current step %s: %s", step.GetId(), step.GetDescription())
	if step.GetToolName() != "" {
		text += fmt.Sprintf(" (tool: %s)", step.GetToolName())
	}
	return &typev1.Message{Role: typev1.Role_ROLE_SYSTEM, Content: text},
		&typev1.Source{Kind: "plan", Id: step.GetId(), Title: step.GetDescription()}
}
