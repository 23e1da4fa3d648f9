package tokens

import (
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/toolwire"
)

// Counter counts the tokens text, messages and tool schemas cost one model. Counters are
// safe for concurrent use.
type Counter interface {
	// Encoding names how the counter counts: a BPE encoding ("cl100k_base", "o200k_base")
	// or EncodingEstimate.
	Encoding() string
	// Text returns the token count of text; 0 for the empty string.
	Text(text string) int64
	// Message returns the token count of one message: MessageOverhead plus its content, its
	// reasoning, its name and tool_call_id and, for every tool call, the call's id, name and
	// raw arguments (the JSON of the parsed arguments when the raw text is empty). A nil
	// message costs nothing.
	Message(m *typev1.Message) int64
	// Messages returns the token count of a conversation: the sum over its messages.
	Messages(msgs []*typev1.Message) int64
	// Tools returns the token count of the tool schemas offered on a request: for each tool
	// its name, its description and the JSON of its input schema.
	Tools(tools []*typev1.Tool) int64
}

// EncodingEstimate is the Encoding of the estimate: about ceil(bytes/4) tokens per text
// (Estimate).
const EncodingEstimate = "estimate"

// Estimator is the Counter of the estimate (see Estimate); ForModel returns it for models
// without a known tokenizer.
var Estimator Counter = &counter{encoding: EncodingEstimate, text: Estimate}

// counter builds every count from a text count.
type counter struct {
	encoding string
	text     func(string) int64
	tools    toolwire.Memo[int64] // each shared tool's count: counting renders its schema as JSON
}

func (c *counter) Encoding() string { return c.encoding }

func (c *counter) Text(text string) int64 {
	if text == "" {
		return 0
	}
	return c.text(text)
}

func (c *counter) Message(m *typev1.Message) int64 {
	if m == nil {
		return 0
	}
	n := MessageOverhead + c.Text(m.GetContent()) + c.Text(m.GetReasoning()) +
		c.Text(m.GetName()) + c.Text(m.GetToolCallId())
	for _, call := range m.GetToolCalls() {
		n += c.Text(call.GetId()) + c.Text(call.GetName())
		if raw := call.GetRawArguments(); raw != "" {
			n += c.Text(raw)
		} else {
			n += c.Text(structJSON(call.GetArguments()))
		}
	}
	return n
}

func (c *counter) Messages(msgs []*typev1.Message) int64 {
	var n int64
	for _, m := range msgs {
		n += c.Message(m)
	}
	return n
}

func (c *counter) Tools(tools []*typev1.Tool) int64 {
	var n int64
	for _, t := range tools {
		n += c.tools.Get(t, c.tool)
	}
	return n
}

// tool is what one tool costs.
func (c *counter) tool(t *typev1.Tool) int64 {
	return c.Text(t.GetName()) + c.Text(t.GetDescription()) + c.Text(structJSON(t.GetInputSchema()))
}
