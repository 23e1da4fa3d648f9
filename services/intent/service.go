package intent

import (
	"cmp"
	"context"
	"log/slog"
	"strings"
	"time"
	"unicode"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/ask"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/runid"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/toolname"
	"google.golang.org/grpc"
)

// DefaultMaxMessageBytes is the message size limit used when Options.MaxMessageBytes is 0.
const DefaultMaxMessageBytes = 64 << 10

// DefaultModelTimeout bounds the intent model's answer when Options.ModelTimeout is 0, as the
// planning model's (a caller without a deadline would otherwise let a model that never answers
// hold the parse): a message's reading is one short answer.
const DefaultModelTimeout = time.Minute

// MaxConversationIDBytes is the longest conversation_id, as the public API's (Run, Decide):
// any UUID or hash.
const MaxConversationIDBytes = 256

// Options configures the intent service.
type Options struct {
	// MaxMessageBytes is the largest accepted message; 0 means DefaultMaxMessageBytes.
	MaxMessageBytes int
	// Logger receives one debug record per parsed message, and a warning whenever the model
	// fails; nil means slog.Default().
	Logger *slog.Logger
	// Model is asked for the goal, constraints, task type, clarification and safety of each
	// message (config models.intent); nil uses the deterministic rules only.
	Model *ask.Model
	// ModelTimeout bounds the model's answer, past which the rules parse the message; 0 means
	// DefaultModelTimeout. The answer also ends a fifth of the caller's time before the
	// caller's deadline, so that the rules' parse still reaches it.
	ModelTimeout time.Duration
	// MaxAttachmentBytes is the most inline content a message's attachments may have in all;
	// 0 means DefaultMaxAttachmentBytes.
	MaxAttachmentBytes int
}

// Service implements intentv1.IntentServiceServer as the package documentation says.
type Service struct {
	intentv1.UnimplementedIntentServiceServer
	maxBytes           int
	log                *slog.Logger
	model              *ask.Model // nil: rules only
	timeout            time.Duration
	maxAttachmentBytes int
}

// New returns a Service configured by opts.
func New(opts Options) *Service {
	s := &Service{maxBytes: opts.MaxMessageBytes, log: opts.Logger, model: opts.Model,
		timeout:            cmp.Or(opts.ModelTimeout, DefaultModelTimeout),
		maxAttachmentBytes: cmp.Or(opts.MaxAttachmentBytes, DefaultMaxAttachmentBytes)}
	if s.maxBytes <= 0 {
		s.maxBytes = DefaultMaxMessageBytes
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// Register registers the service on g (a gRPC server or an in-process channel).
func (s *Service) Register(g grpc.ServiceRegistrar) {
	intentv1.RegisterIntentServiceServer(g, s)
}

// Parse turns a message into a goal, constraints, a task type and a tool policy.
func (s *Service) Parse(ctx context.Context, req *intentv1.ParseRequest) (*intentv1.ParseResponse, error) {
	msg := req.GetMessage()
	switch {
	case strings.TrimSpace(msg) == "":
		return nil, stageerr.Invalid("message must not be empty")
	case len(msg) > s.maxBytes:
		return nil, stageerr.Invalid("message is %d bytes, the limit is %d bytes", len(msg), s.maxBytes)
	}
	if _, ok := typev1.Surface_name[int32(req.GetSurface())]; !ok {
		return nil, stageerr.Invalid("unknown surface %d", req.GetSurface())
	}
	// The run (none when empty) scopes the model's request: an id the generation stage
	// refuses would fall back to the rules without saying why.
	if err := runid.CheckField("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	if n := len(req.GetConversationId()); n > MaxConversationIDBytes {
		return nil, stageerr.Invalid("conversation_id: at most %d bytes, got %d", MaxConversationIDBytes, n)
	}
	// The stage logs it, as the public API's rule for a conversation says (auth.CheckControl).
	if err := auth.CheckControl("conversation_id", req.GetConversationId()); err != nil {
		return nil, err
	}
	if n := len(req.GetUserId()); n > auth.MaxIDBytes { // unread, but bounded as every stage's
		return nil, stageerr.Invalid("user_id: at most %d bytes, got %d", auth.MaxIDBytes, n)
	}
	if n := len(req.GetAvailableTools()); n > toolname.MaxRequestTools {
		return nil, stageerr.Invalid("available_tools: at most %d, got %d", toolname.MaxRequestTools, n)
	}
	for i, tool := range req.GetAvailableTools() {
		if n := len(tool); n > toolname.MaxRequestBytes {
			return nil, stageerr.Invalid("available_tools[%d]: at most %d bytes, got %d",
				i, toolname.MaxRequestBytes, n)
		}
	}
	if err := checkAttachments(req.GetAttachments(), s.maxAttachmentBytes); err != nil {
		return nil, err
	}
	goal := cleanGoal(msg)
	if rule, ok := unsafeRule(goal); ok {
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNSAFE,
			"request violates the safety policy: %s", rule)
	}
	if !strings.ContainsFunc(msg, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNCLEAR,
			"cannot determine an intent: the message has no letters or digits")
	}
	policy, reason := toolPolicy(req.GetSurface(), goal, req.GetAvailableTools())
	resp := &intentv1.ParseResponse{ToolPolicy: policy, PolicyReason: reason}
	if s.model != nil {
		fallback, err := s.askModel(ctx, req, resp)
		if err != nil {
			return nil, err
		}
		if fallback != "" {
			resp.FallbackReason = fallback
			s.log.WarnContext(ctx, "intent model not used: falling back to the rules", slog.String("run_id", req.GetRunId()), slog.String("reason", fallback))
		}
	}
	if resp.GetSource() != SourceModel {
		applyRules(resp, goal, req.GetAvailableTools())
	}
	s.log.DebugContext(ctx, "intent parsed",
		slog.String("conversation_id", req.GetConversationId()),
		slog.String("source", resp.GetSource()),
		slog.String("task_type", resp.GetTaskType().String()),
		slog.String("tool_policy", policy.String()),
		slog.Int("constraints", len(resp.GetConstraints())),
		slog.Bool("needs_clarification", resp.GetNeedsClarification()))
	return resp, nil
}

// applyRules fills resp's goal, constraints, task type and clarification by the rules; tools
// are the names of the tools the run may use.
func applyRules(resp *intentv1.ParseResponse, goal string, tools []string) {
	resp.Source = SourceRules
	resp.Goal = goal
	resp.Constraints = extractConstraints(goal, tools)
	resp.TaskType = classify(goal)
	if q, vague := clarification(goal); vague {
		resp.NeedsClarification = true
		resp.ClarificationQuestion = q
	}
}
