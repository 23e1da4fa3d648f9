package mesh_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/grpc"
)

// TestAnswersStreamWhenTheRunStreams: a run streams its model's answers (GenerateStream, its
// text as llm_delta events) when it is started with StreamRun, and asks for them in one
// request (Generate, no llm_delta) when started with Run, as seed 002 §10's invoke and
// astream_events do; RunOverrides.stream_answers chooses either way, and the contract says
// which. The generation stage is a replacement over real gRPC that counts its calls. Every
// stream the orchestrator asks for omits tool-call deltas, which its llm_delta events would not
// carry.
func TestAnswersStreamWhenTheRunStreams(t *testing.T) {
	gen := &answeringGeneration{}
	h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{
			mesh.Generation: serveStage(t, mesh.Generation, func(g *grpc.Server) { generationv1.RegisterGenerationServiceServer(g, gen) }),
		}
	})
	streamRun := func(req *agentv1.RunRequest) *typev1.RunResult {
		t.Helper()
		stream, err := h.client.StreamRun(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		evs := received(t, stream)
		if len(evs) == 0 || evs[len(evs)-1].GetRunFinished() == nil {
			t.Fatalf("StreamRun ended without run_finished after %d events", len(evs))
		}
		return evs[len(evs)-1].GetRunFinished().GetResult()
	}
	yes, no := true, false
	for _, tc := range []struct {
		name     string
		run      func(*agentv1.RunRequest) *typev1.RunResult
		override *bool
		streamed bool
	}{
		{"Run", func(req *agentv1.RunRequest) *typev1.RunResult { return h.run(t, req) }, nil, false},
		{"StreamRun", streamRun, nil, true},
		{"Run/stream_answers=true", func(req *agentv1.RunRequest) *typev1.RunResult { return h.run(t, req) }, &yes, true},
		{"StreamRun/stream_answers=false", streamRun, &no, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			unary, streams := gen.unary.Load(), gen.asked.Load()
			res := tc.run(&agentv1.RunRequest{Message: "Say hello.", Overrides: &agentv1.RunOverrides{StreamAnswers: tc.override}})
			if !res.GetSuccess() || res.GetFinalReport().GetContent() != "Hello." {
				t.Fatalf("%s %s: %q", res.GetOutcome(), res.GetExitReason(), res.GetFinalReport().GetContent())
			}
			if got := res.GetContract().GetStreamAnswers(); got != tc.streamed {
				t.Errorf("contract stream_answers %v, want %v", got, tc.streamed)
			}
			wantStreams, wantUnary := int64(0), int64(1)
			if tc.streamed {
				wantStreams, wantUnary = 1, 0
			}
			if got, gotUnary := gen.asked.Load()-streams, gen.unary.Load()-unary; got != wantStreams || gotUnary != wantUnary {
				t.Errorf("%d GenerateStream and %d Generate calls, want %d and %d", got, gotUnary, wantStreams, wantUnary)
			}
			if _, deltas := h.llmEvents(t, res.GetRunId()); (deltas > 0) != tc.streamed {
				t.Errorf("%d llm_delta events; want some: %v", deltas, tc.streamed)
			}
		})
	}
	if asked, omitted := gen.asked.Load(), gen.omitted.Load(); asked == 0 || omitted != asked {
		t.Errorf("%d of %d streams asked to omit tool-call deltas, want all", omitted, asked)
	}
}

// answeringGeneration is a generation stage in place of the mesh's: every stream answers
// "Hello." in one delta and the final answer, every Generate call the same answer. It counts
// the unary calls, the streams asked for and those that asked to omit tool-call deltas.
type answeringGeneration struct {
	generationv1.UnimplementedGenerationServiceServer
	unary, asked, omitted atomic.Int64
}

func (g *answeringGeneration) Generate(_ context.Context, req *generationv1.GenerateRequest) (*generationv1.GenerateResponse, error) {
	g.unary.Add(1)
	return hello(req), nil
}

func (g *answeringGeneration) GenerateStream(in *generationv1.GenerateStreamRequest, stream grpc.ServerStreamingServer[generationv1.GenerateStreamResponse]) error {
	g.asked.Add(1)
	if in.GetOmitToolCallDeltas() {
		g.omitted.Add(1)
	}
	if err := stream.Send(&generationv1.GenerateStreamResponse{Chunk: &generationv1.GenerateStreamResponse_Delta{Delta: &generationv1.Delta{Content: "Hello."}}}); err != nil {
		return err
	}
	return stream.Send(&generationv1.GenerateStreamResponse{Chunk: &generationv1.GenerateStreamResponse_Final{Final: hello(in.GetRequest())}})
}

// hello is answeringGeneration's answer to req.
func hello(req *generationv1.GenerateRequest) *generationv1.GenerateResponse {
	return &generationv1.GenerateResponse{
		Type: generationv1.ResponseType_RESPONSE_TYPE_MESSAGE, Content: "Hello.", StopReason: "stop",
		Provider: req.GetTarget().GetProvider(), Model: req.GetTarget().GetModel(),
		Usage: &typev1.TokenUsage{Input: 10, Output: 2, Total: 12}, AdapterStatus: generationv1.AdapterStatus_ADAPTER_STATUS_NATIVE,
	}
}
