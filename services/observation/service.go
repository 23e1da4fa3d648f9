// Package observation implements the ObservationService: it turns a raw tool result into the
// observation the model sees, truncating oversized output with the exact notice of the ai-agent
// contract, converting failures into "(tool failed: <reason>)" and parsing JSON output.
package observation

import (
	"context"
	"log/slog"

	observationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/observation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc"
)

// DefaultMaxInputBytes is the largest raw result accepted when Options.MaxInputBytes is 0.
const DefaultMaxInputBytes = 16 << 20

// Options configures the service.
type Options struct {
	// MaxInputBytes is the largest raw_result accepted; a larger one fails with
	// OBSERVATION_TOO_LARGE. 0 means DefaultMaxInputBytes (16 MiB).
	MaxInputBytes int64
}

// Service implements observationv1.ObservationServiceServer.
type Service struct {
	observationv1.UnimplementedObservationServiceServer
	maxInput int64
	log      *slog.Logger
}

// New returns a Service configured by opts.
func New(opts Options) *Service {
	if opts.MaxInputBytes <= 0 {
		opts.MaxInputBytes = DefaultMaxInputBytes
	}
	return &Service{maxInput: opts.MaxInputBytes, log: slog.Default().With("service", "observation")}
}

// Register registers the service on g.
func (s *Service) Register(g *grpc.Server) {
	observationv1.RegisterObservationServiceServer(g, s)
}

// Observe turns one raw tool result into an observation.
//
// A failed execution (status ERROR or TIMEOUT) becomes "(tool failed: <reason>)". A successful
// one is passed through, truncated to max_bytes at a rune boundary with the notice
// "[TRUNCATED] Original size X bytes; truncated to Y bytes." on its own first line (and a
// warning logged with the tool name, actual and limit bytes), and parsed
// into structured when it is a JSON object. An unspecified status counts as success.
// should_continue is false only after a successful final report tool.
func (s *Service) Observe(ctx context.Context, req *observationv1.ObserveRequest) (*observationv1.ObserveResponse, error) {
	if err := s.validate(req); err != nil {
		return nil, err
	}
	raw := req.GetRawResult()
	resp := &observationv1.ObserveResponse{
		OriginalBytes:  int64(len(raw)),
		ShouldContinue: true,
	}
	switch req.GetStatus() {
	case typev1.ToolStatus_TOOL_STATUS_ERROR:
		resp.Observation = failed(req.GetError())
		return resp, nil
	case typev1.ToolStatus_TOOL_STATUS_TIMEOUT:
		resp.Observation = failed("timeout")
		return resp, nil
	}

	structured, err := parseJSON(raw, req.GetExpectJson())
	if err != nil {
		return nil, err
	}
	resp.Structured = structured
	resp.Observation, resp.Truncated = truncate(raw, req.GetMaxBytes())
	if resp.Truncated {
		s.log.WarnContext(ctx, "tool response truncated",
			"tool", req.GetToolName(), "actual_bytes", len(raw), "limit_bytes", req.GetMaxBytes())
	}
	if raw == "" {
		resp.Observation = NoOutput
	}
	resp.ShouldContinue = !finalReportTools[req.GetToolName()]
	return resp, nil
}

func (s *Service) validate(req *observationv1.ObserveRequest) error {
	if req.GetToolName() == "" {
		return stageerr.Invalid("tool_name must not be empty")
	}
	if req.GetMaxBytes() < 0 {
		return stageerr.Invalid("max_bytes must not be negative, got %d", req.GetMaxBytes())
	}
	if _, ok := typev1.ToolStatus_name[int32(req.GetStatus())]; !ok {
		return stageerr.Invalid("status %d is not a known tool status", req.GetStatus())
	}
	if n := int64(len(req.GetRawResult())); n > s.maxInput {
		return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_OBSERVATION_TOO_LARGE,
			"raw_result is %d bytes, over the limit of %d bytes", n, s.maxInput)
	}
	return nil
}

// finalReportTools are the tools whose successful call ends the loop.
var finalReportTools = map[string]bool{
	"final_report":        true,
	"agent__final_report": true,
}
