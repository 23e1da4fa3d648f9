package mesh_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"google.golang.org/grpc"
)

// TestTransportFailuresOfGenerationFailTheRun: a generation stage's failure that gRPC itself
// reports, without the StageError detail of a stage contract — an answer over
// grpc.max_message_bytes (RESOURCE_EXHAUSTED), a replacement stage lacking the method
// (UNIMPLEMENTED) — is the generation stage's failure: the run fails FAILED_PROVIDER, its
// error naming the stage and the cause. It was an unknown failure, which recovery answers by
// asking the user: the run paused AWAITING_INPUT with "Something unexpected went wrong" and
// no error, for a failure no answer of the user's can mend.
func TestTransportFailuresOfGenerationFailTheRun(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stage generationv1.GenerationServiceServer
		cause string
	}{
		{"answer over the message limit", hugeGeneration{}, "larger than max"},
		{"method unimplemented", generationv1.UnimplementedGenerationServiceServer{},
			"not implemented"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.GRPC.MaxMessageBytes = 1 << 20
			h := startOptions(t, cfg, 1, nil, func(o *mesh.Options) {
				addr := serveStage(t, mesh.Generation, func(g *grpc.Server) {
					generationv1.RegisterGenerationServiceServer(g, tc.stage)
				})
				o.StageAddrs = map[string]string{mesh.Generation: addr}
			})
			for _, stream := range []bool{false, true} {
				res := h.run(t, &agentv1.RunRequest{Message: "Say hello.",
					Overrides: &agentv1.RunOverrides{StreamAnswers: &stream}})
				if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PROVIDER || res.GetSuccess() {
					t.Fatalf("stream %v: outcome %s %s (%v), want FAILED_PROVIDER",
						stream, res.GetOutcome(), res.GetExitReason(), res.GetError())
				}
				msg := res.GetError().GetMessage()
				if !strings.Contains(msg, "generation") || !strings.Contains(msg, tc.cause) {
					t.Errorf("stream %v: error %q, want one naming the generation stage and %q",
						stream, msg, tc.cause)
				}
			}
		})
	}
}

// hugeGeneration is a generation stage in place of the mesh's that answers 2 MiB of text,
// over the 1 MiB grpc.max_message_bytes of TestTransportFailuresOfGenerationFailTheRun.
type hugeGeneration struct {
	generationv1.UnimplementedGenerationServiceServer
}

func (hugeGeneration) Generate(_ context.Context,
	req *generationv1.GenerateRequest) (*generationv1.GenerateResponse, error) {
	resp := hello(req)
	resp.Content = strings.Repeat("a", 2<<20)
	return resp, nil
}

func (g hugeGeneration) GenerateStream(in *generationv1.GenerateStreamRequest,
	stream grpc.ServerStreamingServer[generationv1.GenerateStreamResponse]) error {
	resp, _ := g.Generate(stream.Context(), in.GetRequest())
	final := &generationv1.GenerateStreamResponse_Final{Final: resp}
	return stream.Send(&generationv1.GenerateStreamResponse{Chunk: final})
}
