package intent

import (
	"context"
	"log/slog"
	"strings"
	"unicode"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc"
)

// DefaultMaxMessageBytes is the message size limit used when Options.MaxMessageBytes is 0.
const DefaultMaxMessageBytes = 64 << 10

// Options configures the intent service.
type Options struct {
	// MaxMessageBytes is the largest accepted message; 0 means DefaultMaxMessageBytes.
	MaxMessageBytes int
	// Logger receives one debug record per parsed message; nil means slog.Default().
	Logger *slog.Logger
}

// Service implements intentv1.IntentServiceServer with the deterministic rules of the
// package documentation.
type Service struct {
	intentv1.UnimplementedIntentServiceServer
	maxBytes int
	log      *slog.Logger
}

// New returns a Service configured by opts.
func New(opts Options) *Service {
	s := &Service{maxBytes: opts.MaxMessageBytes, log: opts.Logger}
	if s.maxBytes <= 0 {
		s.maxBytes = DefaultMaxMessageBytes
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// Register registers the service on g.
func (s *Service) Register(g *grpc.Server) {
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
	resp := &intentv1.ParseResponse{
		Goal:         goal,
		Constraints:  extractConstraints(goal),
		TaskType:     classify(goal),
		ToolPolicy:   policy,
		PolicyReason: reason,
	}
	if q, vague := clarification(goal); vague {
		resp.NeedsClarification = true
		resp.ClarificationQuestion = q
	}
	s.log.DebugContext(ctx, "intent parsed",
		slog.String("conversation_id", req.GetConversationId()),
		slog.String("task_type", resp.GetTaskType().String()),
		slog.String("tool_policy", policy.String()),
		slog.Int("constraints", len(resp.GetConstraints())),
		slog.Bool("needs_clarification", resp.GetNeedsClarification()))
	return resp, nil
}
