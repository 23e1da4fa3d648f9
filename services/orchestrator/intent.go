package orchestrator

import (
	"strings"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// takeIntent keeps what INTENT found for the rest of the run: the goal; the task type and the
// constraints, for planning and, after the prompts in the system message, for the model; and
// the intent model's requests, in the accounting. The run's first message is its system
// message, still as the profile made it (INTENT runs once, before any checkpoint after
// STARTED).
func (r *run) takeIntent(resp *intentv1.ParseResponse) {
	r.goal = resp.GetGoal()
	r.constraints = resp.GetConstraints()
	r.taskType = ""
	if resp.GetTaskType() != intentv1.TaskType_TASK_TYPE_UNSPECIFIED {
		r.taskType = taskTypeName(resp.GetTaskType())
	}
	r.accountStage(stageIntent, resp.GetAccounting())
	r.conversation[0] = &typev1.Message{Role: typev1.Role_ROLE_SYSTEM,
		Content: withIntent(r.conversation[0].GetContent(), r.taskType, r.constraints)}
}

// stageIntent names the intent stage in accounting entries.
const stageIntent = "intent"

// accountStage takes the LLM requests a stage made for the run into its accounting, with the
// stage's name, and usage.
func (r *run) accountStage(stage string, entries []*typev1.AccountingEntry) {
	for _, e := range entries {
		e.Stage = stage
		r.account(e)
		r.addUsage(e.GetTokens())
	}
}

// withIntent is a system message with the intent stage's findings after it: the task type
// and the constraints the answer must meet.
func withIntent(prompt, taskType string, constraints []string) string {
	var b strings.Builder
	b.WriteString(prompt)
	if taskType != "" {
		b.WriteString("\n\nTask type: " + taskType)
	}
	if len(constraints) > 0 {
		b.WriteString("\n\nConstraints the answer must meet:")
		for _, c := range constraints {
			b.WriteString("\n- " + c)
		}
	}
	// A copy of its own size: the run holds the prompt for as long as it lives (issue 15), and
	// the builder's buffer has grown by doubling, up to twice it.
	return strings.Clone(b.String())
}
