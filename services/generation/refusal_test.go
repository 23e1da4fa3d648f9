package generation_test

import (
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestOpenAIRefusalIsContentFiltered: a model that declines answers content null and its
// refusal in message.refusal (delta.refusal when streamed), with finish_reason stop. The
// refusal was not read: the answer came out empty with stop reason stop, which the
// orchestrator took for an empty answer. It is now the answer's content, with stop reason
// content_filter, as Anthropic's refusal is: not the model's answer (the orchestrator asks
// again, with a notice that the filter withheld it), its text there for whoever reads it.
func TestOpenAIRefusalIsContentFiltered(t *testing.T) {
	const refusal = "I'm sorry, but I can't help with that request."
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Refusal: refusal}}})
	client := openAIClient(t, srv, nil)
	check := func(t *testing.T, resp *generationv1.GenerateResponse) {
		t.Helper()
		if resp.GetContent() != refusal || resp.GetStopReason() != "content_filter" ||
			resp.GetType() != generationv1.ResponseType_RESPONSE_TYPE_MESSAGE {
			t.Errorf("refusal answered as content %q stop reason %q type %v, want %q content_filter MESSAGE",
				resp.GetContent(), resp.GetStopReason(), resp.GetType(), refusal)
		}
	}
	t.Run("complete", func(t *testing.T) {
		resp, err := client.Generate(t.Context(), request("openai", "gpt-test", user("do it")))
		if err != nil {
			t.Fatal(err)
		}
		check(t, resp)
	})
	t.Run("stream", func(t *testing.T) {
		deltas, final, err := streamAll(t, client, request("openai", "gpt-test", user("do it")))
		if err != nil {
			t.Fatal(err)
		}
		check(t, final)
		if content, _, _ := joinDeltas(deltas); content != refusal {
			t.Errorf("content deltas add up to %q, want the refusal %q", content, refusal)
		}
	})
}
