package generation_test

import (
	"strings"
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/generation"
	"google.golang.org/grpc/codes"
)

// TestEmbeddingsMatchTheirInputs: each vector goes to the input its index names. An answer
// whose indices do not name each input once (two vectors for one input, one for an input
// that does not exist) is BAD_RESPONSE; it was taken when the count matched, and a vector was
// stored for the wrong text. Vectors in another order are put in order, and an answer whose
// vectors carry no index (all 0, as servers that omit it decode) keeps the order it has.
func TestEmbeddingsMatchTheirInputs(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       [][]float32 // nil: BAD_RESPONSE
	}{
		{"reordered", `{"data":[{"index":1,"embedding":[2]},{"index":0,"embedding":[1]}]}`, [][]float32{{1}, {2}}},
		{"no indices", `{"data":[{"embedding":[1]},{"embedding":[2]}]}`, [][]float32{{1}, {2}}},
		{"one input twice", `{"data":[{"index":1,"embedding":[1]},{"index":1,"embedding":[2]}]}`, nil},
		{"an input that does not exist", `{"data":[{"index":0,"embedding":[1]},{"index":2,"embedding":[2]}]}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := replying(200, nil, tc.body)(t)
			client := serveProviders(t, map[string]generation.Provider{"openai": openAIAt(t, url, nil)})
			resp, err := client.Embed(t.Context(), &generationv1.EmbedRequest{
				Target: &typev1.Target{Provider: "openai", Model: "e"}, Inputs: []string{"first", "second"},
			})
			if tc.want == nil {
				se := stageError(t, err, codes.Unavailable)
				if se.Class != typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE || !strings.Contains(se.Msg, "index") {
					t.Errorf("error %v %q, want BAD_RESPONSE naming the index", se.Class, se.Msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range resp.GetEmbeddings() {
				if got := e.GetValues(); len(got) != 1 || got[0] != tc.want[i][0] {
					t.Errorf("embedding %d = %v, want %v", i, got, tc.want[i])
				}
			}
		})
	}
}
