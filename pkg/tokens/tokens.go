// Package tokens counts how many tokens text, messages and tool schemas cost a model.
//
// ForModel returns the Counter of a model: OpenAI-family models are counted exactly with
// their BPE tokenizer (cl100k_base or o200k_base, loaded from BPE files compiled into the
// binary, never downloaded); every other model uses the estimate. A BPE counter remembers the
// counts of the texts it encoded (the most recent 32,768, by hash), so counting a
// conversation again as it grows only encodes its new messages.
//
// The estimate is deliberately simple and model-independent: one token per four bytes of
// UTF-8, rounded up (ceil(bytes/4)), so any non-empty text costs at least one token, except
// that a character of three bytes (CJK, Indic scripts) costs a token and one of four (an
// emoji) two, as tokenizers split them about so finely. It over-counts slightly for English
// prose, which keeps budgets on the safe side. The
// package-level functions (Estimate, Message, Messages, Tools) always use the estimate; they
// are the Estimator counter's methods.
//
// Messages and tool schemas cost the same way under every counter: MessageOverhead per
// message plus the counted text of its parts, and for a tool its name, description and the
// compact JSON of its input schema with sorted keys.
package tokens

import (
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/structjson"
	"google.golang.org/protobuf/types/known/structpb"
)

// BytesPerToken is the number of bytes of text counted as one token.
const BytesPerToken = 4

// MessageOverhead is the fixed cost of one message (role and framing tokens).
const MessageOverhead = 4

// MaxCount bounds every token count a stage takes in a request (a context window, a budget),
// far above any real one, so that sums of counts cannot overflow.
const MaxCount = 1 << 48

// Message returns the estimated token count of one message: MessageOverhead plus its content,
// its reasoning, its name and tool_call_id and, for every tool call, the call's id, name and
// raw arguments (the JSON of the parsed arguments when the raw text is empty): the provider
// receives the ids and names too. A nil message costs nothing.
func Message(m *typev1.Message) int64 { return Estimator.Message(m) }

// Messages returns the estimated token count of a conversation: the sum over its messages.
func Messages(msgs []*typev1.Message) int64 { return Estimator.Messages(msgs) }

// Tools returns the estimated token count of the tool schemas offered on a request: for each
// tool its name, its description and the JSON of its input schema.
func Tools(tools []*typev1.Tool) int64 { return Estimator.Tools(tools) }

// structJSON renders s as compact JSON with sorted keys, so equal structs always cost the
// same; a nil struct renders as "".
func structJSON(s *structpb.Struct) string {
	if s == nil {
		return ""
	}
	b, err := structjson.Marshal(s)
	if err != nil {
		// NaN and infinite numbers have no JSON form; count the text form instead.
		return s.String()
	}
	return string(b)
}
