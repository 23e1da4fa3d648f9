package mesh_test

import (
	"sync/atomic"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/grpc"
)

// TestOrchestratorOmitsToolCallDeltas: the orchestrator asks a generation stage (here a
// replacement over real gRPC) for its streams without tool-call deltas, which its llm_delta
// events would not carry: every GenerateStream request of a run sets omit_tool_call_deltas.
func TestOrchestratorOmitsToolCallDeltas(t *testing.T) {
	gen := &answeringGeneration{}
	h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{
			mesh.Generation: serveStage(t, mesh.Generation, func(g *grpc.Server) { generationv1.RegisterGenerationServiceServer(g, gen) }),
		}
	})
	res := h.run(t, &agentv1.RunRequest{Message: "Say hello."})
	if !res.GetSuccess() || res.GetFinalReport().GetContent() != "Hello." {
		t.Fatalf("%s %s: %q", res.GetOutcome(), res.GetExitReason(), res.GetFinalReport().GetContent())
	}
	if asked, omitted := gen.asked.Load(), gen.omitted.Load(); asked == 0 || omitted != asked {
		t.Errorf("%d of %d streams asked to omit tool-call deltas, want all", omitted, asked)
	}
}

// answeringGeneration is a generation stage in place of the mesh's: every stream answers
// "Hello." in one delta and the final answer. It counts the streams asked for and those that
// asked to omit tool-call deltas.
type answeringGeneration struct {
	generationv1.UnimplementedGenerationServiceServer
	asked, omitted atomic.Int64
}

func (g *answeringGeneration) GenerateStream(in *generationv1.GenerateStreamRequest, stream grpc.ServerStreamingServer[generationv1.GenerateStreamResponse]) error {
	g.asked.Add(1)
	if in.GetOmitToolCallDeltas() {
		g.omitted.Add(1)
	}
	if err := stream.Send(&generationv1.GenerateStreamResponse{Chunk: &generationv1.GenerateStreamResponse_Delta{Delta: &generationv1.Delta{Content: "Hello."}}}); err != nil {
		return err
	}
	return stream.Send(&generationv1.GenerateStreamResponse{Chunk: &generationv1.GenerateStreamResponse_Final{Final: &generationv1.GenerateResponse{
		Type: generationv1.ResponseType_RESPONSE_TYPE_MESSAGE, Content: "Hello.", StopReason: "stop",
		Provider: in.GetRequest().GetTarget().GetProvider(), Model: in.GetRequest().GetTarget().GetModel(),
		Usage: &typev1.TokenUsage{Input: 10, Output: 2, Total: 12}, AdapterStatus: generationv1.AdapterStatus_ADAPTER_STATUS_NATIVE,
	}}})
}
