package planning

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/ask"
	"github.com/agentmesh/agentmesh/pkg/plan"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/toolname"
)

// PlanTool is the tool the planning model calls with its plan.
const PlanTool = "submit_plan"

// planInstructions are the planning model's system message; %d is the step limit.
const planInstructions = `You plan how an AI assistant will achieve a user's goal with the tools it has.

Break the goal into the fewest steps that achieve it, as a dependency graph. Each step has a short unique id ("step-1", "step-2" ...), a description of what it does, the tool it uses and the ids of the steps that must finish before it. A step's tool is exactly the name of one of the available tools; leave it out for a step the assistant does by reasoning or writing. Use only the available tools and never invent one. A question the assistant can answer from its own knowledge is one step without a tool. Respect every constraint. Use at most %d steps.

Set requires_human_approval when a step does something a person should approve first (sends a message, writes or deletes data, spends money). Set estimated_steps to the number of model turns you expect, the final answer included.

When the input holds the plan so far, revise it: keep every step that is done exactly as it is (same id, description and tool), and plan the rest again so that the goal is still reached; do not give a step again the tool that failed for it.

If the goal cannot be achieved with the available tools and reasoning, set viable to false and say why in reason.

Answer by calling ` + PlanTool + `.`

// Bounds of the planning model's answer, in characters (of up to 4 bytes each): a step's
// within the limits of a request's steps (MaxStepIDBytes, toolname.MaxRequestBytes, the goal's 64 KiB),
// so that a revision can send the model's plan back; a reason as long as the intent model's,
// as it becomes the run's NO_VIABLE_PLAN message.
const (
	maxReasonChars      = 1000
	maxStepIDChars      = MaxStepIDBytes / 4
	maxToolChars        = toolname.MaxRequestBytes / 4
	maxDescriptionChars = 4000
)

// planSchema is the JSON schema of the planning model's answer.
var planSchema = map[string]any{
	"type":                 "object",
	"required":             []any{"viable", "steps"},
	"additionalProperties": false,
	"properties": map[string]any{
		"viable": map[string]any{"type": "boolean", "description": "false when the goal cannot be achieved with the available tools and reasoning"},
		"reason": map[string]any{"type": "string", "maxLength": maxReasonChars,
			"description": "why the goal cannot be achieved, when viable is false"},
		"steps": map[string]any{
			"type":     "array",
			"maxItems": plan.MaxStepsLimit,
			"items": map[string]any{
				"type":                 "object",
				"required":             []any{"id", "description"},
				"additionalProperties": false,
				"properties": map[string]any{
					"id": map[string]any{"type": "string", "minLength": 1, "maxLength": maxStepIDChars,
						"description": "unique within the plan"},
					"description": map[string]any{"type": "string", "minLength": 1,
						"maxLength": maxDescriptionChars, "description": "what the step does"},
					"tool": map[string]any{"type": "string", "maxLength": maxToolChars,
						"description": "the available tool the step uses; leave out for a reasoning step"},
					"depends_on": map[string]any{"type": "array", "maxItems": plan.MaxStepsLimit,
						"items":       map[string]any{"type": "string", "maxLength": maxStepIDChars},
						"description": "ids of the steps that must finish first"},
				},
			},
		},
		"requires_human_approval": map[string]any{"type": "boolean", "description": "a step needs a person's approval before it runs"},
		// At most what PlanResponse.estimated_steps, an int32, holds: a larger estimate would
		// wrap around to a negative one.
		"estimated_steps": map[string]any{"type": "integer", "minimum": 1, "maximum": math.MaxInt32,
			"description": "model turns expected, the final answer included"},
	},
}

// modelPlan is the planning model's answer.
type modelPlan struct {
	Viable                bool        `json:"viable"`
	Reason                string      `json:"reason"`
	Steps                 []modelStep `json:"steps"`
	RequiresHumanApproval bool        `json:"requires_human_approval"`
	EstimatedSteps        int         `json:"estimated_steps"`
}

// modelStep is one step of the planning model's answer.
type modelStep struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	Tool        string   `json:"tool"`
	DependsOn   []string `json:"depends_on"`
}

// fromModel asks the planning model for the plan of in and validates it like proposed steps.
// The model saying the goal is not viable is NO_VIABLE_PLAN, and a plan over the step limit
// PLAN_TOO_COMPLEX: both are the model's judgement of the goal, and carry its request's
// accounting. A failed request (no answer within the model's time too) or an unusable answer
// (outside the schema, no steps, an unknown tool, a cycle, a broken dependency, a revision that
// does not keep a done step as it was) returns errModel: the caller falls back to the rules.
func (s *Service) fromModel(ctx context.Context, in *input) (*made, error) {
	timeout := s.timeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(deadline)*4/5)
	}
	mctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var answer modelPlan
	goal, rest := in.describe()
	a, err := s.model.Object(mctx, ask.Question{
		RunID:        in.req.GetRunId(),
		Instructions: fmt.Sprintf(planInstructions, in.limit),
		Before:       "Goal: ",
		Input:        goal,
		After:        rest,
		Tool:         PlanTool,
		Description:  "Submit the plan.",
		Schema:       planSchema,
	}, &answer)
	var accounting []*typev1.AccountingEntry
	if a.Entry != nil { // the request's accounting, made by pkg/ask
		accounting = append(accounting, a.Entry)
	}
	if err != nil {
		return nil, modelFailure(accounting, "the planning model failed: %v", err)
	}
	if !answer.Viable {
		e := stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN,
			"the planning model found no viable plan: %s", cmp.Or(strings.TrimSpace(answer.Reason), "it gave no reason"))
		e.Accounting = accounting
		return nil, e
	}
	if len(answer.Steps) == 0 {
		return nil, modelFailure(accounting, "the planning model's plan has no steps")
	}
	steps, err := normalise("steps", answer.proposed(), in.tools, in.limit)
	if err != nil {
		if se := stageerr.As(err); se != nil && se.Code == typev1.StageErrorCode_STAGE_ERROR_CODE_PLAN_TOO_COMPLEX {
			se.Msg = "the planning model's " + se.Msg
			se.Accounting = accounting
			return nil, se
		}
		return nil, modelFailure(accounting, "the planning model's plan was refused: %v", err)
	}
	if rev := in.req.GetRevision(); rev != nil {
		if err := plan.KeepsDone(steps, rev.GetSteps()); err != nil {
			return nil, modelFailure(accounting, "the planning model's revision was refused: %v", err)
		}
	}
	return &made{steps: steps, estimated: answer.EstimatedSteps, approval: answer.RequiresHumanApproval, source: SourceModel, accounting: accounting}, nil
}

// errModel is a planning model's failure that the rules stand in for.
type errModel struct {
	reason     string
	accounting []*typev1.AccountingEntry
}

func (e *errModel) Error() string { return e.reason }

// modelFailure is the errModel of a reason, with the accounting of the model's request.
func modelFailure(accounting []*typev1.AccountingEntry, format string, args ...any) error {
	return &errModel{reason: fmt.Sprintf(format, args...), accounting: accounting}
}

// asModelFailure returns err as an errModel, or nil when it is not one.
func asModelFailure(err error) *errModel {
	var e *errModel
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// proposed returns the model's steps as proposed steps.
func (p modelPlan) proposed() []*typev1.Step {
	steps := make([]*typev1.Step, len(p.Steps))
	for i, st := range p.Steps {
		steps[i] = &typev1.Step{Id: st.ID, Description: st.Description, ToolName: st.Tool, DependsOn: st.DependsOn}
	}
	return steps
}

// describe is the planning model's user message after "Goal: ", in two parts: the goal first
// (a scripted model matches on it), the part cut when the message does not fit the model's
// window, then what the plan may use and the plan so far when it is revised, never cut.
func (in *input) describe() (goal, rest string) {
	var b strings.Builder
	b.WriteString("\n")
	if in.taskType != "" && in.taskType != "unspecified" {
		fmt.Fprintf(&b, "Task type: %s\n", in.taskType)
	}
	if cs := in.req.GetConstraints(); len(cs) > 0 {
		b.WriteString("Constraints:\n")
		for _, c := range cs {
			fmt.Fprintf(&b, "- %s\n", c)
		}
	}
	fmt.Fprintf(&b, "Step limit: %d\n", in.limit)
	if len(in.req.GetAvailableTools()) == 0 {
		b.WriteString("Available tools: none\n")
	} else {
		b.WriteString("Available tools:\n")
		for _, t := range in.req.GetAvailableTools() {
			fmt.Fprintf(&b, "- %s: %s", t.GetName(), strings.Join(strings.Fields(t.GetDescription()), " "))
			if t.GetRequiresApproval() {
				b.WriteString(" (requires a person's approval)")
			}
			b.WriteString("\n")
		}
	}
	if rev := in.req.GetRevision(); rev != nil {
		b.WriteString("The plan so far:\n")
		for _, p := range rev.GetSteps() {
			b.WriteString("- " + progressLine(p) + "\n")
		}
		fmt.Fprintf(&b, "Revise it because: %s\n", rev.GetReason())
	}
	return in.goal, b.String()
}

// progressLine renders a step with its state: "step-2 [failed: timeout]: add the numbers
// (tool: calculator; after step-1)", and a done step's structured result as JSON after " → ".
func progressLine(p *typev1.StepProgress) string {
	st := p.GetStep()
	state := stateName(p.GetState())
	if p.GetNote() != "" {
		state += ": " + p.GetNote()
	}
	var extra []string
	if st.GetToolName() != "" {
		extra = append(extra, "tool: "+st.GetToolName())
	}
	if len(st.GetDependsOn()) > 0 {
		extra = append(extra, "after "+strings.Join(st.GetDependsOn(), ", "))
	}
	line := fmt.Sprintf("%s [%s]: %s", st.GetId(), state, st.GetDescription())
	if len(extra) > 0 {
		line += " (" + strings.Join(extra, "; ") + ")"
	}
	if out := plan.OutputJSON(p.GetOutput()); out != "" {
		line += " → " + out
	}
	return line
}

// stateName is a step state as the planning model reads it: "pending", "done", "failed".
func stateName(s typev1.StepState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "STEP_STATE_"))
}
