package stagetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/textcut"
	"google.golang.org/protobuf/types/known/structpb"
)

// rulesTarget is the built-in deterministic provider the generation cases assume.
var rulesTarget = &typev1.Target{Provider: "rules", Model: "rules-v1"}

// calculatorTool is the calculator as the generation cases offer it.
var calculatorTool = &typev1.Tool{
	Name:        "calculator",
	Description: "Evaluates an arithmetic expression exactly as written and returns the number.",
	InputSchema: mustStruct(map[string]any{
		"type":       "object",
		"properties": map[string]any{"expression": map[string]any{"type": "string"}},
		"required":   []any{"expression"},
	}),
}

var generationCases = []testCase{
	{"lists-rules-provider", `ListProviders names the built-in "rules" provider, sorted`,
		func(ctx context.Context, k *kit) error {
			resp, err := generationv1.NewGenerationServiceClient(k.conn).ListProviders(ctx, &generationv1.ListProvidersRequest{})
			if err != nil {
				return wantOK(err)
			}
			names := resp.GetProviders()
			if !slices.Contains(names, "rules") || !slices.IsSorted(names) {
				return fmt.Errorf("providers %v, want a sorted list with rules", names)
			}
			return nil
		}},
	{"message-answer", "a greeting gets a canonical answer: a message with content and token usage",
		func(ctx context.Context, k *kit) error {
			resp, err := generationv1.NewGenerationServiceClient(k.conn).Generate(ctx, &generationv1.GenerateRequest{
				RunId: k.id("run"), Target: rulesTarget, Messages: []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "Hello"}}})
			if err != nil {
				return wantOK(err)
			}
			return checkMessage(resp)
		}},
	{"tool-call", "arithmetic with the calculator offered is a tool call of the calculator with " +
		"valid JSON arguments, and token usage",
		func(ctx context.Context, k *kit) error {
			resp, err := generationv1.NewGenerationServiceClient(k.conn).Generate(ctx, &generationv1.GenerateRequest{
				RunId: k.id("run"), Target: rulesTarget, Tools: []*typev1.Tool{calculatorTool}, ToolChoice: "auto",
				Messages: []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "What is 6 times 7?"}}})
			if err != nil {
				return wantOK(err)
			}
			if resp.GetType() != generationv1.ResponseType_RESPONSE_TYPE_TOOL_CALL {
				return fmt.Errorf("type %s, want RESPONSE_TYPE_TOOL_CALL", resp.GetType())
			}
			return checkAnswer(resp, []*typev1.Tool{calculatorTool})
		}},
	{"stream-final-last", "GenerateStream sends deltas, then exactly one final answer, last: " +
		"for a greeting, a message with content and token usage, which the deltas' texts join up " +
		"to (content and reasoning each)",
		func(ctx context.Context, k *kit) error {
			deltas, final, err := readStream(ctx, k, &generationv1.GenerateStreamRequest{
				Request: &generationv1.GenerateRequest{RunId: k.id("run"), Target: rulesTarget,
					Messages: []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "Hello"}}}})
			if err != nil {
				return err
			}
			if err := checkMessage(final); err != nil {
				return err
			}
			if len(deltas) == 0 {
				return fmt.Errorf("no delta came before the final answer %q", final.GetContent())
			}
			return checkJoin(deltas, final)
		}},
	{"stream-omit-tool-call-deltas", "GenerateStream with omit_tool_call_deltas sends no " +
		"tool-call delta, and the calls complete in the final answer, with token usage",
		func(ctx context.Context, k *kit) error {
			deltas, final, err := readStream(ctx, k, &generationv1.GenerateStreamRequest{
				OmitToolCallDeltas: true,
				Request: &generationv1.GenerateRequest{RunId: k.id("run"), Target: rulesTarget, Tools: []*typev1.Tool{calculatorTool}, ToolChoice: "auto",
					Messages: []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "What is 6 times 7?"}}}})
			if err != nil {
				return err
			}
			for _, d := range deltas {
				if d.GetToolCall() != nil {
					return fmt.Errorf("a tool-call delta came although omitted: %v", d)
				}
			}
			if final.GetType() != generationv1.ResponseType_RESPONSE_TYPE_TOOL_CALL {
				return fmt.Errorf("final answer %v, want a tool call of the calculator", final)
			}
			return checkAnswer(final, []*typev1.Tool{calculatorTool})
		}},
	{"embed", "Embed returns one non-empty vector per input, all of one length",
		func(ctx context.Context, k *kit) error {
			resp, err := generationv1.NewGenerationServiceClient(k.conn).Embed(ctx, &generationv1.EmbedRequest{
				Target: rulesTarget, Inputs: []string{"the sky is blue", "six times seven"}})
			if err != nil {
				return wantOK(err)
			}
			e := resp.GetEmbeddings()
			if len(e) != 2 || len(e[0].GetValues()) == 0 || len(e[0].GetValues()) != len(e[1].GetValues()) {
				return fmt.Errorf("%d embeddings, want 2 non-empty vectors of one length", len(e))
			}
			return nil
		}},
	{"empty-messages", "a request without messages is INVALID_ARGUMENT naming messages",
		func(ctx context.Context, k *kit) error {
			_, err := generationv1.NewGenerationServiceClient(k.conn).Generate(ctx, &generationv1.GenerateRequest{RunId: k.id("run"), Target: rulesTarget})
			return wantInvalid(err, "messages")
		}},
	{"unknown-provider", "a target naming an unknown provider is INVALID_ARGUMENT naming target.provider",
		func(ctx context.Context, k *kit) error {
			_, err := generationv1.NewGenerationServiceClient(k.conn).Generate(ctx, &generationv1.GenerateRequest{RunId: k.id("run"),
				Target:   &typev1.Target{Provider: "no-such-provider", Model: "m"},
				Messages: []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "Hello"}}})
			return wantInvalid(err, "provider")
		}},
	{"model-name-over-limit", "a target model name of 257 bytes is INVALID_ARGUMENT naming target.model",
		func(ctx context.Context, k *kit) error {
			_, err := generationv1.NewGenerationServiceClient(k.conn).Generate(ctx, &generationv1.GenerateRequest{RunId: k.id("run"),
				Target:   &typev1.Target{Provider: rulesTarget.GetProvider(), Model: strings.Repeat("m", 257)},
				Messages: []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "Hello"}}})
			return wantInvalid(err, "target.model")
		}},
	{"run-id-over-limit", "a run_id of 129 bytes is INVALID_ARGUMENT naming run_id",
		func(ctx context.Context, k *kit) error {
			_, err := generationv1.NewGenerationServiceClient(k.conn).Generate(ctx, &generationv1.GenerateRequest{RunId: strings.Repeat("r", 129),
				Target: rulesTarget, Messages: []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "Hello"}}})
			return wantInvalid(err, "run_id")
		}},
	{"empty-embed-inputs", "Embed without inputs is INVALID_ARGUMENT naming inputs",
		func(ctx context.Context, k *kit) error {
			_, err := generationv1.NewGenerationServiceClient(k.conn).Embed(ctx, &generationv1.EmbedRequest{Target: rulesTarget})
			return wantInvalid(err, "inputs")
		}},
}

// readStream makes a GenerateStream call of req and reads it to its end: its deltas, and its
// final answer, which must come once, last.
func readStream(ctx context.Context, k *kit, req *generationv1.GenerateStreamRequest) ([]*generationv1.Delta, *generationv1.GenerateResponse, error) {
	stream, err := generationv1.NewGenerationServiceClient(k.conn).GenerateStream(ctx, req)
	if err != nil {
		return nil, nil, wantOK(err)
	}
	var (
		deltas []*generationv1.Delta
		final  *generationv1.GenerateResponse
	)
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, wantOK(err)
		}
		if final != nil {
			return nil, nil, fmt.Errorf("a chunk came after the final answer")
		}
		if d := chunk.GetDelta(); d != nil {
			deltas = append(deltas, d)
		}
		final = chunk.GetFinal()
	}
	if final == nil {
		return nil, nil, fmt.Errorf("the stream ended without a final answer")
	}
	return deltas, final, nil
}

// checkJoin returns how a stream's deltas differ from its final answer: the deltas' content,
// and their reasoning, each join up to the final answer's. The orchestrator's llm_delta events
// carry them as they come, and the public API promises that the deltas of an attempt join up
// to the answer of its llm_response.
func checkJoin(deltas []*generationv1.Delta, final *generationv1.GenerateResponse) error {
	var content, reasoning strings.Builder
	for _, d := range deltas {
		content.WriteString(d.GetContent())
		reasoning.WriteString(d.GetReasoning())
	}
	var p problems
	for _, text := range []struct{ name, deltas, final string }{
		{"content", content.String(), final.GetContent()},
		{"reasoning", reasoning.String(), final.GetReasoning()},
	} {
		if text.deltas == text.final {
			continue
		}
		at := 0
		for at < min(len(text.deltas), len(text.final)) && text.deltas[at] == text.final[at] {
			at++
		}
		at = textcut.Boundary(text.final, at) // the start of the character they differ in
		p.addf("the deltas' %s (%d bytes) does not join up to the final answer's %s (%d bytes): "+
			"they differ from byte %d, %q against %q", text.name, len(text.deltas), text.name,
			len(text.final), at, clip(text.deltas[at:]), clip(text.final[at:]))
	}
	return p.err()
}

// clip is the start of a text, to show where two texts differ.
func clip(s string) string {
	if r := []rune(s); len(r) > 20 {
		return string(r[:20]) + "…"
	}
	return s
}

// checkAnswer returns how an answer breaks the generation contract: a known type; a message
// has content; a tool call has calls, each with an id, an offered tool's name and parsed
// (JSON object) arguments; and the answer has its token usage, input and output, as the
// provider reported it or as the stage estimated it when the provider reported none. The
// orchestrator holds a run to max_tokens_consumed and projects its context guard's ctx tokens
// with it, so a stage that answers without it lets a run past both.
func checkAnswer(resp *generationv1.GenerateResponse, offered []*typev1.Tool) error {
	var p problems
	if u := resp.GetUsage(); u.GetInput() <= 0 || u.GetOutput() <= 0 {
		p.addf("usage: input %d and output %d tokens, want more than 0 each, reported or "+
			"estimated (the orchestrator counts max_tokens_consumed and the context guard with it)",
			u.GetInput(), u.GetOutput())
	}
	switch resp.GetType() {
	case generationv1.ResponseType_RESPONSE_TYPE_MESSAGE:
		if resp.GetContent() == "" {
			p.addf("a message without content")
		}
	case generationv1.ResponseType_RESPONSE_TYPE_TOOL_CALL:
		if len(resp.GetToolCalls()) == 0 {
			p.addf("a tool call without tool_calls")
		}
	case generationv1.ResponseType_RESPONSE_TYPE_DONE:
	default:
		p.addf("type %s, want message, tool call or done", resp.GetType())
	}
	for i, c := range resp.GetToolCalls() {
		if c.GetId() == "" {
			p.addf("tool_calls[%d] has no id", i)
		}
		if !slices.ContainsFunc(offered, func(t *typev1.Tool) bool { return t.GetName() == c.GetName() }) {
			p.addf("tool_calls[%d] calls %q, which was not offered", i, c.GetName())
		}
		if c.GetArguments() == nil {
			p.addf("tool_calls[%d] has no arguments", i)
		}
	}
	return p.err()
}

// checkMessage returns how the answer to a greeting breaks the generation contract: it is a
// message with content (an empty answer, RESPONSE_TYPE_DONE, is one the orchestrator can only
// retry), and a canonical answer.
func checkMessage(resp *generationv1.GenerateResponse) error {
	if resp.GetType() != generationv1.ResponseType_RESPONSE_TYPE_MESSAGE {
		return fmt.Errorf("type %s (content %q), want RESPONSE_TYPE_MESSAGE with content", resp.GetType(), resp.GetContent())
	}
	return checkAnswer(resp, nil)
}

// mustStruct converts a JSON-like value for a request.
func mustStruct(v map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(v)
	if err != nil {
		panic(err)
	}
	return s
}
