package generation

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/tokens"
)

// RulesName is the name of the built-in rules provider.
const RulesName = "rules"

// finalReportTool is the tool the runtime offers alone when the model must finish.
const finalReportTool = "final_report"

// rules is the deterministic built-in model: it answers from the conversation and the offered
// tools without any network.
type rules struct{}

// NewRules returns "rules", a deterministic built-in model with no network, used by
// `agentmesh dev` and by tests. It answers a tool result by quoting it (a knowledge search that
// found nothing with seed 002's "I don't have enough information …" refusal), a greeting with a
// greeting, and, when the matching tool is offered, a time or date question with current_time,
// arithmetic with calculator, a search or documentation request with knowledge_search, and
// "call <tool> {json}" with that call. Anything else gets an honest answer that it needs an LLM
// provider. When final_report is the only tool offered, its text answer goes into final_report.
func NewRules() Provider { return rules{} }

// Name returns "rules".
func (rules) Name() string { return RulesName }

// Complete answers the conversation.
func (rules) Complete(ctx context.Context, req *Request) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return rulesReply(req), nil
}

// Stream answers the conversation, sending the text word by word and a tool call as one
// fragment.
func (rules) Stream(ctx context.Context, req *Request, onDelta func(*generationv1.Delta) error) (*Response, error) {
	resp := rulesReply(req)
	for _, w := range splitWords(resp.Content) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := onDelta(&generationv1.Delta{Content: w}); err != nil {
			return nil, err
		}
	}
	if err := forwardCalls(resp.ToolCalls, onDelta); err != nil {
		return nil, err
	}
	return resp, nil
}

// Embed returns hashed bag-of-words vectors.
func (rules) Embed(ctx context.Context, _ string, inputs []string) (*Embeddings, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := &Embeddings{}
	for _, text := range inputs {
		out.Vectors = append(out.Vectors, hashEmbedding(text))
		out.Usage.Input += tokens.Estimate(text)
	}
	return out, nil
}

// rulesReply builds the answer: a tool call when a rule picks one, else text; the text goes
// into final_report when that is the only tool offered.
func rulesReply(req *Request) *Response {
	c := newConversation(req)
	d := c.decide()
	if d.tool == "" && c.onlyFinalReport() {
		d = decision{tool: finalReportTool, args: c.finalReportArguments(d.text)}
	}
	resp := &Response{
		Model: req.Model,
		Usage: Usage{Input: tokens.Messages(req.Messages) + tokens.Tools(req.Tools)},
	}
	if d.tool == "" {
		resp.Content = d.text
		resp.FinishReason = "stop"
		resp.Usage.Output = tokens.Estimate(d.text)
		return resp
	}
	resp.ToolCalls = []ToolCall{{ID: fmt.Sprintf("call_%d", c.callCount()+1), Name: d.tool, Arguments: d.args}}
	resp.FinishReason = "tool_calls"
	resp.Usage.Output = tokens.Estimate(d.tool) + tokens.Estimate(d.args)
	return resp
}

// decision is what the rules chose: a text answer, or a tool call with raw JSON arguments.
type decision struct {
	text string
	tool string
	args string
}

// call is a tool-call decision with arguments marshalled from v.
func call(tool string, v any) decision {
	return decision{tool: tool, args: jsonText(v)}
}

// jsonText marshals maps of plain values, which cannot fail.
func jsonText(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// conversation is the request as the rules read it.
type conversation struct {
	req     *Request
	offered map[string]*typev1.Tool
}

func newConversation(req *Request) conversation {
	offered := make(map[string]*typev1.Tool, len(req.Tools))
	for _, t := range req.Tools {
		offered[t.GetName()] = t
	}
	return conversation{req: req, offered: offered}
}

// offers reports whether the tool is offered.
func (c conversation) offers(name string) bool {
	_, ok := c.offered[name]
	return ok
}

// onlyFinalReport reports whether final_report is the only tool offered.
func (c conversation) onlyFinalReport() bool {
	return len(c.offered) == 1 && c.offers(finalReportTool)
}

// toolNames lists the offered tools in request order.
func (c conversation) toolNames() []string {
	names := make([]string, 0, len(c.req.Tools))
	for _, t := range c.req.Tools {
		names = append(names, t.GetName())
	}
	return names
}

// callCount is the number of tool calls already in the conversation.
func (c conversation) callCount() int {
	n := 0
	for _, m := range c.req.Messages {
		n += len(m.GetToolCalls())
	}
	return n
}

// lastUserMessage is the text of the latest user message, or "".
func (c conversation) lastUserMessage() string {
	for i := len(c.req.Messages) - 1; i >= 0; i-- {
		if m := c.req.Messages[i]; m.GetRole() == typev1.Role_ROLE_USER {
			return strings.TrimSpace(m.GetContent())
		}
	}
	return ""
}

// finalReportArguments puts text into final_report's arguments, using the property names of
// the offered schema ("report_content"/"content", "report_format"/"format").
func (c conversation) finalReportArguments(text string) string {
	props := c.offered[finalReportTool].GetInputSchema().GetFields()["properties"].GetStructValue().GetFields()
	pick := func(preferred, alternative string) string {
		if _, ok := props[preferred]; !ok {
			if _, alt := props[alternative]; alt {
				return alternative
			}
		}
		return preferred
	}
	return jsonText(map[string]string{
		pick("report_format", "format"):   "text",
		pick("report_content", "content"): text,
	})
}
