package planning

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc"
)

// DefaultMaxSteps is the step limit used when a request's max_steps is 0 and
// Options.DefaultMaxSteps is not set (stages contract: "Max 20 steps (configurable)").
const DefaultMaxSteps = 20

// DefaultMaxGoalBytes is the goal size limit used when Options.MaxGoalBytes is 0.
const DefaultMaxGoalBytes = 64 << 10

// Options configures the planning service.
type Options struct {
	// DefaultMaxSteps is the step limit for requests with max_steps 0; 0 means DefaultMaxSteps.
	DefaultMaxSteps int
	// MaxGoalBytes is the largest accepted goal; 0 means DefaultMaxGoalBytes.
	MaxGoalBytes int
	// Logger receives one debug record per plan; nil means slog.Default().
	Logger *slog.Logger
}

// Service implements planningv1.PlanningServiceServer.
type Service struct {
	planningv1.UnimplementedPlanningServiceServer
	defaultMax int
	maxGoal    int
	log        *slog.Logger
}

// New returns a Service configured by opts.
func New(opts Options) *Service {
	s := &Service{defaultMax: opts.DefaultMaxSteps, maxGoal: opts.MaxGoalBytes, log: opts.Logger}
	if s.defaultMax <= 0 {
		s.defaultMax = DefaultMaxSteps
	}
	if s.maxGoal <= 0 {
		s.maxGoal = DefaultMaxGoalBytes
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// Register registers the service on g.
func (s *Service) Register(g *grpc.Server) {
	planningv1.RegisterPlanningServiceServer(g, s)
}

// Plan validates proposed steps or generates a plan from the goal.
func (s *Service) Plan(ctx context.Context, req *planningv1.PlanRequest) (*planningv1.PlanResponse, error) {
	goal := strings.TrimSpace(req.GetGoal())
	if goal == "" {
		return nil, stageerr.Invalid("goal must not be empty")
	}
	if len(goal) > s.maxGoal {
		return nil, stageerr.Invalid("goal is %d bytes, the limit is %d bytes", len(goal), s.maxGoal)
	}
	if req.GetMaxSteps() < 0 {
		return nil, stageerr.Invalid("max_steps must not be negative, got %d", req.GetMaxSteps())
	}
	limit := int(req.GetMaxSteps())
	if limit == 0 {
		limit = s.defaultMax
	}
	tools, err := indexTools(req.GetAvailableTools())
	if err != nil {
		return nil, err
	}
	taskType, err := parseTaskType(req.GetTaskType())
	if err != nil {
		return nil, err
	}

	var steps []*typev1.Step
	if len(req.GetProposedSteps()) > 0 {
		steps, err = normalise(req.GetProposedSteps(), tools, limit)
	} else {
		steps, err = generate(goal, taskType, req.GetConstraints(), req.GetAvailableTools(), limit)
	}
	if err != nil {
		return nil, err
	}
	resp := &planningv1.PlanResponse{
		Steps:          steps,
		EstimatedSteps: int32(len(steps) + 1),
		RequiresHumanApproval: slices.ContainsFunc(steps, func(st *typev1.Step) bool {
			return tools[st.GetToolName()].GetRequiresApproval()
		}),
	}
	s.log.DebugContext(ctx, "plan made",
		slog.Int("steps", len(steps)),
		slog.Bool("proposed", len(req.GetProposedSteps()) > 0),
		slog.Bool("requires_human_approval", resp.GetRequiresHumanApproval()))
	return resp, nil
}

// indexTools maps the available tools by name, refusing empty and repeated names.
func indexTools(list []*typev1.Tool) (map[string]*typev1.Tool, error) {
	tools := make(map[string]*typev1.Tool, len(list))
	for i, t := range list {
		name := t.GetName()
		switch {
		case strings.TrimSpace(name) == "":
			return nil, stageerr.Invalid("available_tools[%d] has an empty name", i)
		case tools[name] != nil:
			return nil, stageerr.Invalid("tool %q appears twice in available_tools", name)
		}
		tools[name] = t
	}
	return tools, nil
}

// taskTypes are the task types of the intent stage, by their short names.
var taskTypes = []string{"", "unspecified", "question", "action", "creative", "analysis"}

// parseTaskType accepts a task type by its short name ("action") or its enum name
// ("TASK_TYPE_ACTION"), in any case, and returns the short name.
func parseTaskType(s string) (string, error) {
	t := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "task_type_")
	if !slices.Contains(taskTypes, t) {
		return "", stageerr.Invalid("unknown task_type %q (want question, action, creative or analysis)", s)
	}
	return t, nil
}
