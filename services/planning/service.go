package planning

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/ask"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/plan"
	"github.com/agentmesh/agentmesh/pkg/runid"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc"
)

// DefaultMaxSteps is the step limit used when a request's max_steps is 0 and
// Options.DefaultMaxSteps is not set (stages contract: "Max 20 steps (configurable)").
const DefaultMaxSteps = plan.DefaultMaxSteps

// DefaultMaxGoalBytes is the goal size limit used when Options.MaxGoalBytes is 0.
const DefaultMaxGoalBytes = 64 << 10

// DefaultModelTimeout bounds the planning model's answer when Options.ModelTimeout is 0.
const DefaultModelTimeout = time.Minute

// ModelTarget is the model the configuration names for the planning stage (models.planning),
// or nil when the stage plans by its rules (config.Config.StageModel).
func ModelTarget(cfg *config.Config) *typev1.Target {
	t := cfg.StageModel(cfg.Models.Planning)
	if t == nil {
		return nil
	}
	return &typev1.Target{Provider: t.Provider, Model: t.Model}
}

// DrainTimeout is how long a stopping planning stage with a model of its own (models.planning)
// lets its calls in flight finish (pkg/server.WithDrainTimeout): a plan the model makes, which
// may take DefaultModelTimeout (the rules then plan at once), and server.DrainMargin to
// answer. Cut off sooner, the plan is asked of the model (and paid for) again by the retry. ok
// is false without a model: the stage's calls are then quick, and the default drain is enough.
func DrainTimeout(cfg *config.Config) (d time.Duration, ok bool) {
	return server.DrainFor(DefaultModelTimeout), ModelTarget(cfg) != nil
}

// Sources of a plan (PlanResponse.source).
const (
	// SourceModel is a plan the planning model made.
	SourceModel = "model"
	// SourceRules is a plan the deterministic rules made, or proposed steps validated.
	SourceRules = "rules"
)

// Options configures the planning service.
type Options struct {
	// DefaultMaxSteps is the step limit for requests with max_steps 0; 0 means DefaultMaxSteps.
	DefaultMaxSteps int
	// MaxGoalBytes is the largest accepted goal; 0 means DefaultMaxGoalBytes.
	MaxGoalBytes int
	// Model is the planning model (config models.planning), asked through the generation
	// service; nil plans by the rules.
	Model *ask.Model
	// ModelTimeout bounds the model's answer, past which the rules make the plan; 0 means
	// DefaultModelTimeout. The answer also ends a fifth of the caller's time before the
	// caller's deadline, so that the rules' plan still reaches it.
	ModelTimeout time.Duration
	// Logger receives one debug record per plan, and a warning when the planning model's plan
	// is not used; nil means slog.Default().
	Logger *slog.Logger
}

// Service implements planningv1.PlanningServiceServer.
type Service struct {
	planningv1.UnimplementedPlanningServiceServer
	defaultMax int
	maxGoal    int
	model      *ask.Model
	timeout    time.Duration
	log        *slog.Logger
}

// New returns a Service configured by opts.
func New(opts Options) *Service {
	s := &Service{defaultMax: opts.DefaultMaxSteps, maxGoal: opts.MaxGoalBytes, model: opts.Model, timeout: cmp.Or(opts.ModelTimeout, DefaultModelTimeout), log: opts.Logger}
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

// Register registers the service on g (a gRPC server or an in-process channel).
func (s *Service) Register(g grpc.ServiceRegistrar) {
	planningv1.RegisterPlanningServiceServer(g, s)
}

// input is a validated request.
type input struct {
	req      *planningv1.PlanRequest
	goal     string
	taskType string // the short name: "action", "question" ...
	limit    int
	tools    map[string]*typev1.Tool
}

// made is a plan made for a request.
type made struct {
	steps      []*typev1.Step
	estimated  int  // the planning model's estimate of the loop iterations; 0: one per step to do, plus one
	approval   bool // the planning model asks for a person's approval
	source     string
	fallback   string
	accounting []*typev1.AccountingEntry
}

// Plan validates proposed steps, or makes the plan (or its revision) with the planning model
// when one is configured, and by the rules otherwise or when the model's plan is not usable.
func (s *Service) Plan(ctx context.Context, req *planningv1.PlanRequest) (*planningv1.PlanResponse, error) {
	in, err := s.validate(req)
	if err != nil {
		return nil, err
	}
	m, err := s.make(ctx, in)
	if err != nil {
		return nil, err
	}
	estimated := m.estimated
	if estimated <= 0 {
		estimated = remaining(m.steps, req.GetRevision()) + 1
	}
	resp := &planningv1.PlanResponse{
		Steps:          m.steps,
		EstimatedSteps: int32(estimated),
		RequiresHumanApproval: m.approval || slices.ContainsFunc(m.steps, func(st *typev1.Step) bool {
			return in.tools[st.GetToolName()].GetRequiresApproval() && !done(st, req.GetRevision())
		}),
		Source:         m.source,
		FallbackReason: m.fallback,
		Accounting:     m.accounting,
	}
	s.log.DebugContext(ctx, "plan made",
		slog.String("run_id", req.GetRunId()),
		slog.Int("steps", len(m.steps)),
		slog.String("source", m.source),
		slog.Bool("revision", req.GetRevision() != nil),
		slog.Bool("proposed", len(req.GetProposedSteps()) > 0),
		slog.Bool("requires_human_approval", resp.GetRequiresHumanApproval()))
	return resp, nil
}

// make makes the plan of in: proposed steps validated, the planning model's plan, or the
// rules' plan, which stands in for a model that failed or whose plan is unusable. A failure
// carries the accounting of the model's request.
func (s *Service) make(ctx context.Context, in *input) (*made, error) {
	if len(in.req.GetProposedSteps()) > 0 {
		steps, err := normalise("proposed_steps", in.req.GetProposedSteps(), in.tools, in.limit)
		if err != nil {
			return nil, err
		}
		return &made{steps: steps, source: SourceRules}, nil
	}
	if s.model == nil {
		return s.rules(in)
	}
	m, err := s.fromModel(ctx, in)
	failure := asModelFailure(err)
	if failure == nil {
		return m, err
	}
	s.log.WarnContext(ctx, "the planning model's plan is not used; the rules make the plan",
		slog.String("run_id", in.req.GetRunId()), slog.String("reason", failure.reason))
	m, err = s.rules(in)
	if err != nil {
		if se := stageerr.As(err); se != nil {
			se.Accounting = append(se.Accounting, failure.accounting...)
		}
		return nil, err
	}
	m.fallback, m.accounting = failure.reason, failure.accounting
	return m, nil
}

// rules makes the plan of in, or revises it, by the deterministic rules.
func (s *Service) rules(in *input) (*made, error) {
	var (
		steps []*typev1.Step
		err   error
	)
	if rev := in.req.GetRevision(); rev != nil {
		steps, err = revise(rev, in)
	} else {
		steps, err = generate(in.goal, in.taskType, in.req.GetConstraints(), in.req.GetAvailableTools(), in.limit)
	}
	if err != nil {
		return nil, err
	}
	return &made{steps: steps, source: SourceRules}, nil
}

// validate checks a request and resolves its defaults.
func (s *Service) validate(req *planningv1.PlanRequest) (*input, error) {
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
	if err := checkLimits(req, s.maxGoal); err != nil {
		return nil, err
	}
	// The run (none when empty) scopes the model's request: an id the generation stage
	// refuses would fall back to the rules without saying why.
	if err := runid.CheckField("run_id", req.GetRunId()); err != nil {
		return nil, err
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
	if err := validateRevision(req); err != nil {
		return nil, err
	}
	return &input{req: req, goal: goal, taskType: taskType, limit: limit, tools: tools}, nil
}

// validateRevision checks the revision of a request, if it has one: each step set, with a
// state, an id no other step has, and dependencies on the revision's steps.
func validateRevision(req *planningv1.PlanRequest) error {
	rev := req.GetRevision()
	if rev == nil {
		return nil
	}
	if len(req.GetProposedSteps()) > 0 {
		return stageerr.Invalid("proposed_steps and revision exclude each other: a revision is planned, proposed steps are only validated")
	}
	if len(rev.GetSteps()) == 0 {
		return stageerr.Invalid("revision.steps must not be empty: it is the plan to revise")
	}
	ids := make(map[string]int, len(rev.GetSteps())) // a step's index by its id
	for i, p := range rev.GetSteps() {
		if p.GetStep() == nil {
			return stageerr.Invalid("revision.steps[%d].step must be set", i)
		}
		switch p.GetState() {
		case typev1.StepState_STEP_STATE_PENDING, typev1.StepState_STEP_STATE_DONE, typev1.StepState_STEP_STATE_FAILED:
		default:
			return stageerr.Invalid("revision.steps[%d].state must be pending, done or failed, got %s", i, p.GetState())
		}
		id := strings.TrimSpace(p.GetStep().GetId())
		if id == "" {
			return stageerr.Invalid("revision.steps[%d].step.id must not be empty", i)
		}
		if j, dup := ids[id]; dup {
			return stageerr.Invalid("revision.steps[%d].step.id %q repeats revision.steps[%d]'s", i, id, j)
		}
		ids[id] = i
	}
	// Checked before the planning model is asked about the plan: its revision of a broken
	// plan would be taken.
	for i, p := range rev.GetSteps() {
		for _, dep := range p.GetStep().GetDependsOn() {
			if _, ok := ids[strings.TrimSpace(dep)]; !ok {
				return stageerr.Invalid("revision.steps[%d].step.depends_on: %q is no step of the revision", i, dep)
			}
		}
	}
	return nil
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
