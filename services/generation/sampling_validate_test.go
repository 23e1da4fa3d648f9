package generation_test

import (
	"math"
	"strings"
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// TestSamplingOutOfRangeIsRefused: a request's sampling is held to the ranges the
// configuration's is (temperature 0 to 2, top_p 0 to 1, max_output_tokens not negative),
// INVALID_ARGUMENT naming the field: a
// NaN failed as a request that "cannot be encoded", and values out of range went to the
// provider, which refused them target after target or, a local server, sampled with them.
func TestSamplingOutOfRangeIsRefused(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "ok"}}})
	client := openAIClient(t, srv, nil)
	for _, tc := range []struct {
		name     string
		sampling *generationv1.Sampling
		want     string
	}{
		{"temperature NaN", &generationv1.Sampling{Temperature: proto.Float64(math.NaN())}, "sampling.temperature must be between 0 and 2"},
		{"temperature negative", &generationv1.Sampling{Temperature: proto.Float64(-0.5)}, "sampling.temperature must be between 0 and 2"},
		{"temperature over 2", &generationv1.Sampling{Temperature: proto.Float64(7)}, "sampling.temperature must be between 0 and 2"},
		{"top_p over 1", &generationv1.Sampling{TopP: proto.Float64(1.5)}, "sampling.top_p must be between 0 and 1"},
		{"top_p infinite", &generationv1.Sampling{TopP: proto.Float64(math.Inf(1))}, "sampling.top_p must be between 0 and 1"},
		// A negative limit was taken as unset (a configured limit replaced it) or, with none
		// configured, sent on as max_tokens -1.
		{"max_output_tokens negative", &generationv1.Sampling{MaxOutputTokens: -1},
			"sampling.max_output_tokens must not be negative (0 means the provider's default), got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := request("openai", "gpt-test", user("hi"))
			req.Sampling = tc.sampling
			_, err := client.Generate(t.Context(), req)
			se := stageError(t, err, codes.InvalidArgument)
			if !strings.Contains(se.Msg, tc.want) {
				t.Errorf("message %q, want %q", se.Msg, tc.want)
			}
		})
	}
}
