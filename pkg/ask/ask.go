// Package ask gets a stage's decision from a model as a JSON object of a given schema, through
// the generation service (DESIGN §1: only the generation stage talks to providers). The model
// is offered one tool whose parameters are the schema and must call it; the call's arguments,
// validated against the schema, are the answer. Offering a tool works the same on every
// provider the generation stage speaks (OpenAI, Anthropic, any OpenAI-compatible server),
// which their own structured-output switches do not.
//
// A stage asks only when its configuration names a model for it (config.StageModels), and
// falls back to its deterministic rules when the answer is an error: ErrUnusable when the
// model answered outside the schema, a stage error when generation failed.
package ask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/schema"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/protobuf/types/known/structpb"
)

// ErrUnusable is the error of an answer that is not a call of the offered tool with arguments
// that match its schema; the wrapped message says what was wrong.
var ErrUnusable = errors.New("the model's answer is unusable")

// Model asks one provider/model target through the generation service.
type Model struct {
	// Client is the generation service.
	Client generationv1.GenerationServiceClient
	// Target is the provider and model to ask.
	Target *typev1.Target
	// MaxOutputTokens bounds the answer; 0 leaves the provider's default.
	MaxOutputTokens int64
}

// Question is one request for a decision.
type Question struct {
	// RunID scopes the request, for tracing and accounting.
	RunID string
	// Instructions are the system message: what to decide and how.
	Instructions string
	// Input is the user message: what to decide about.
	Input string
	// Tool names the tool whose arguments are the answer, e.g. "submit_plan".
	Tool string
	// Description tells the model what the tool's arguments mean.
	Description string
	// Schema is the JSON schema of the answer (an object schema).
	Schema map[string]any
}

// Answer is what an Object call cost and who answered.
type Answer struct {
	// Usage is the tokens of the request.
	Usage *typev1.TokenUsage
	// Model is the model that answered, as the provider reports it.
	Model string
	// CostUSD is the request's cost from the configured price of the model.
	CostUSD float64
	// StopReason is the answer's normalised stop reason.
	StopReason string
}

// Object asks q and decodes the validated answer into out (a pointer, as for
// encoding/json.Unmarshal). A failed generation is its stage error; an answer outside the
// schema wraps ErrUnusable. The Answer is filled in whenever the model answered.
func (m *Model) Object(ctx context.Context, q Question, out any) (Answer, error) {
	compiled, err := schema.Compile("ask:///"+q.Tool+".json", q.Schema)
	if err != nil {
		return Answer{}, fmt.Errorf("the schema of %s: %w", q.Tool, err)
	}
	params, err := structpb.NewStruct(q.Schema)
	if err != nil {
		return Answer{}, fmt.Errorf("the schema of %s: %w", q.Tool, err)
	}
	temperature := 0.0
	resp, err := m.Client.Generate(ctx, &generationv1.GenerateRequest{
		RunId:  q.RunID,
		Target: m.Target,
		Messages: []*typev1.Message{
			{Role: typev1.Role_ROLE_SYSTEM, Content: q.Instructions},
			{Role: typev1.Role_ROLE_USER, Content: q.Input},
		},
		Tools:      []*typev1.Tool{{Name: q.Tool, Description: q.Description, InputSchema: params}},
		ToolChoice: "required",
		Sampling:   &generationv1.Sampling{Temperature: &temperature, MaxOutputTokens: m.MaxOutputTokens},
	})
	if err != nil {
		return Answer{}, stageerr.FromError(err)
	}
	ans := Answer{Usage: resp.GetUsage(), Model: resp.GetModel(), CostUSD: resp.GetCostUsd(), StopReason: resp.GetStopReason()}
	var call *typev1.ToolCall
	for _, c := range resp.GetToolCalls() {
		if c.GetName() == q.Tool {
			call = c
			break
		}
	}
	if call == nil {
		return ans, fmt.Errorf("%w: it did not call %s (answered %q)", ErrUnusable, q.Tool, clip(resp.GetContent()))
	}
	args := call.GetArguments().AsMap()
	if err := compiled.Validate(args); err != nil {
		return ans, fmt.Errorf("%w: the arguments of %s do not match its schema: %s", ErrUnusable, q.Tool, schema.Message(err))
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return ans, fmt.Errorf("%w: %v", ErrUnusable, err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return ans, fmt.Errorf("%w: the arguments of %s: %v", ErrUnusable, q.Tool, err)
	}
	return ans, nil
}

// clip shortens a model's text for an error message.
func clip(s string) string {
	const limit = 200
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "…"
}
