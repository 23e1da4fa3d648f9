package generation_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/generation"
	"google.golang.org/grpc/codes"
)

func TestInvalidInput(t *testing.T) {
	client := serveProviders(t, map[string]generation.Provider{"rules": generation.NewRules(), "openai": generation.NewRules()})
	withTools := request("rules", "m", user("x"))
	withTools.Tools = []*typev1.Tool{{Name: "ok"}, {Description: "nameless"}}
	twice := request("rules", "m", user("x"))
	twice.Tools = []*typev1.Tool{{Name: "search"}, {Name: "fetch"}, {Name: "search"}}
	badFormat := request("rules", "m", user("x"))
	badFormat.OutputFormat = 99
	badChoice := request("rules", "m", user("x"))
	badChoice.Tools, badChoice.ToolChoice = []*typev1.Tool{{Name: "search"}}, "requried"
	for _, tc := range []struct {
		name string
		req  *generationv1.GenerateRequest
		want string
	}{
		{"no messages", request("rules", "m"), "messages must not be empty"},
		{"no target", &generationv1.GenerateRequest{Messages: []*typev1.Message{user("x")}}, "target.provider must be set; configured providers: openai, rules"},
		{"unknown provider", request("nope", "m", user("x")), `unknown provider "nope" in target.provider; configured providers: openai, rules`},
		{"no model", request("rules", "", user("x")), "target.model must not be empty"},
		{"message without role", request("rules", "m", user("x"), &typev1.Message{Content: "?"}), "messages[1] has no role"},
		{"message of a role the proto does not name", request("rules", "m", user("x"), &typev1.Message{Role: 99, Content: "?"}), "messages[1].role 99 is not one of its values"},
		{"tool without name", withTools, "tools[1] has no name"},
		{"output format the proto does not name", badFormat, "output_format 99 is not one of its values"},
		// Providers refuse two tools of one name (Anthropic: "Tool names must be unique"),
		// target after target, and a tool_choice naming it would be ambiguous.
		{"two tools of one name", twice, `tools[2].name "search" repeats tools[0]'s`},
		{"tool choice neither a mode nor an offered tool", badChoice, `tool_choice "requried" must be auto, required, none or the name of an offered tool (search)`},
		{"provider name over 256 bytes", request(strings.Repeat("p", 257), "m", user("x")), "target.provider: at most 256 bytes, got 257"},
		{"model name over 256 bytes", request("rules", strings.Repeat("m", 257), user("x")), "target.model: at most 256 bytes, got 257"},
		{"run id over 128 bytes", withRunID(strings.Repeat("r", 129)), "run_id: run id is 129 bytes long; at most 128 are allowed"},
		{"run id with a dot", withRunID("run.1"), `run_id: run id "run.1" contains '.' at byte 3`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Generate(t.Context(), tc.req)
			se := stageError(t, err, codes.InvalidArgument)
			if se.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT || se.Stage != "generation" || !strings.Contains(se.Msg, tc.want) {
				t.Errorf("error = %v stage %q %q, want INVALID_INPUT containing %q", se.Code, se.Stage, se.Msg, tc.want)
			}
			_, _, err = streamAll(t, client, tc.req)
			if se := stageError(t, err, codes.InvalidArgument); !strings.Contains(se.Msg, tc.want) {
				t.Errorf("stream error %q, want %q", se.Msg, tc.want)
			}
		})
	}

	t.Run("stream without request", func(t *testing.T) {
		_, _, err := streamAll(t, client, nil)
		if se := stageError(t, err, codes.InvalidArgument); !strings.Contains(se.Msg, "request must be set") {
			t.Errorf("message = %q", se.Msg)
		}
	})

	for _, tc := range []struct {
		name string
		req  *generationv1.EmbedRequest
		want string
	}{
		{"embed without inputs", &generationv1.EmbedRequest{Target: &typev1.Target{Provider: "rules", Model: "m"}}, "inputs must not be empty"},
		{"embed with unknown provider", &generationv1.EmbedRequest{Target: &typev1.Target{Provider: "x", Model: "m"}, Inputs: []string{"a"}}, `unknown provider "x"`},
		{"embed without model", &generationv1.EmbedRequest{Target: &typev1.Target{Provider: "rules"}, Inputs: []string{"a"}}, "target.model must not be empty"},
		{"embed with a provider name over 256 bytes", &generationv1.EmbedRequest{Target: &typev1.Target{Provider: strings.Repeat("p", 257), Model: "m"}, Inputs: []string{"a"}}, "target.provider: at most 256 bytes, got 257"},
		{"embed with a model name over 256 bytes", &generationv1.EmbedRequest{Target: &typev1.Target{Provider: "rules", Model: strings.Repeat("m", 257)}, Inputs: []string{"a"}}, "target.model: at most 256 bytes, got 257"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Embed(t.Context(), tc.req)
			if se := stageError(t, err, codes.InvalidArgument); !strings.Contains(se.Msg, tc.want) {
				t.Errorf("message = %q, want %q", se.Msg, tc.want)
			}
		})
	}
}

// withRunID is a valid request to the rules provider for run id.
func withRunID(id string) *generationv1.GenerateRequest {
	req := request("rules", "m", user("x"))
	req.RunId = id
	return req
}

// TestLimitsAccepted: names at the limits are taken (the model's name is the rules provider's
// to ignore), and so is a request for no run.
func TestLimitsAccepted(t *testing.T) {
	client := serveProviders(t, map[string]generation.Provider{strings.Repeat("p", 256): generation.NewRules()})
	for _, req := range []*generationv1.GenerateRequest{
		request(strings.Repeat("p", 256), strings.Repeat("m", 256), user("hello")),
		{RunId: strings.Repeat("r", 128), Target: &typev1.Target{Provider: strings.Repeat("p", 256), Model: "m"}, Messages: []*typev1.Message{user("hello")}},
		{Target: &typev1.Target{Provider: strings.Repeat("p", 256), Model: "m"}, Messages: []*typev1.Message{user("hello")}},
	} {
		if _, err := client.Generate(t.Context(), req); err != nil {
			t.Errorf("run id of %d bytes, model of %d: %v", len(req.GetRunId()), len(req.GetTarget().GetModel()), err)
		}
	}
}

func TestNoProvidersConfigured(t *testing.T) {
	_, err := serve(t, generation.Options{}).Generate(t.Context(), request("rules", "m", user("x")))
	if se := stageError(t, err, codes.InvalidArgument); !strings.Contains(se.Msg, "configured providers: none") {
		t.Errorf("message = %q", se.Msg)
	}
}

// failing is a provider that fails every call with err, or answers embeddings with vectors.
type failing struct {
	err     error
	vectors [][]float32
}

func (f failing) Name() string { return "failing" }
func (f failing) Complete(context.Context, *generation.Request) (*generation.Response, error) {
	return nil, f.err
}
func (f failing) Stream(context.Context, *generation.Request, func(*generationv1.Delta) error) (*generation.Response, error) {
	return nil, f.err
}
func (f failing) Embed(context.Context, string, []string) (*generation.Embeddings, error) {
	return &generation.Embeddings{Vectors: f.vectors}, f.err
}

func TestPlainProviderErrorsBecomeGenerationFailures(t *testing.T) {
	client := serveProviders(t, map[string]generation.Provider{"custom": failing{err: errors.New("backend exploded")}})
	_, err := client.Generate(t.Context(), request("custom", "m", user("x")))
	se := stageError(t, err, codes.Unavailable)
	if se.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_GENERATION_FAILED || se.Stage != "generation" || se.Msg != "failing: backend exploded" {
		t.Errorf("error = %v stage %q %q", se.Code, se.Stage, se.Msg)
	}
}

func TestEmbedCountMismatchIsBadResponse(t *testing.T) {
	client := serveProviders(t, map[string]generation.Provider{"custom": failing{vectors: [][]float32{{1}}}})
	_, err := client.Embed(t.Context(), &generationv1.EmbedRequest{Target: &typev1.Target{Provider: "custom", Model: "m"}, Inputs: []string{"a", "b"}})
	se := stageError(t, err, codes.Unavailable)
	if se.Class != typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE || !strings.Contains(se.Msg, "1 embeddings for 2 inputs") {
		t.Errorf("error = %v %q", se.Class, se.Msg)
	}
}

func TestCallerCancellationPassesThrough(t *testing.T) {
	client := serveProviders(t, map[string]generation.Provider{"custom": failing{err: context.Canceled}})
	_, err := client.Generate(t.Context(), request("custom", "m", user("x")))
	stageError(t, err, codes.Canceled)
}
