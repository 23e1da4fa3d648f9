package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// argumentFragment is the size in runes of the streamed fragments of tool call arguments.
const argumentFragment = 8

// answer is one successful scripted answer.
type answer struct {
	id      string
	created int64
	model   string
	turn    int
	t       Turn
}

// toolCalls returns the turn's tool calls in wire form, with default ids.
func (a answer) toolCalls() []WireToolCall {
	calls := make([]WireToolCall, 0, len(a.t.ToolCalls))
	for i, c := range a.t.ToolCalls {
		calls = append(calls, WireToolCall{
			ID:       a.callID(i, c),
			Type:     "function",
			Function: WireFunction{Name: c.Name, Arguments: c.Arguments},
		})
	}
	return calls
}

// callID is the call's scripted id or "call_<turn>_<n>".
func (a answer) callID(i int, c ToolCall) string {
	if c.ID != "" {
		return c.ID
	}
	return fmt.Sprintf("call_%d_%d", a.turn, i+1)
}

// writeCompletion writes the answer as one chat completion body.
func (a answer) writeCompletion(w http.ResponseWriter, req Request) {
	msg := answerMessage{Role: "assistant", ReasoningContent: a.t.Reasoning, ToolCalls: a.toolCalls()}
	if a.t.Content != "" || len(a.t.ToolCalls) == 0 && a.t.Refusal == "" {
		content := a.t.Content
		msg.Content = &content
	}
	if a.t.Refusal != "" {
		refusal := a.t.Refusal
		msg.Refusal = &refusal
	}
	c := completion{
		ID:      a.id,
		Object:  "chat.completion",
		Created: a.created,
		Model:   a.model,
		Choices: []choice{{Index: 0, Message: msg, FinishReason: a.t.finishReason()}},
	}
	if !a.t.NoUsage {
		c.Usage = usageFor(req, a.t)
	}
	writeJSON(w, http.StatusOK, c)
}

// writeStream writes the answer as server-sent events: a role chunk, reasoning, refusal and
// content deltas, tool calls in fragments, the finish chunk, the usage chunk when asked for
// (unless the turn has NoUsage), then [DONE].
func (a answer) writeStream(w http.ResponseWriter, req Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(c chunk) {
		c.ID, c.Object, c.Created, c.Model = a.id, "chat.completion.chunk", a.created, a.model
		data, _ := json.Marshal(c)
		_, _ = fmt.Fprintf(w, "data: %s\n\n", data)
		_ = rc.Flush()
	}
	sendDelta := func(d delta) {
		send(chunk{Choices: []chunkChoice{{Delta: d}}})
	}

	sendDelta(delta{Role: "assistant"})
	if a.t.Streaming != nil {
		a.t.Streaming()
	}
	for _, piece := range words(a.t.Reasoning) {
		sendDelta(delta{ReasoningContent: piece})
	}
	for _, piece := range words(a.t.Refusal) {
		sendDelta(delta{Refusal: piece})
	}
	pieces := words(a.t.Content)
	for i, piece := range pieces {
		sendDelta(delta{Content: piece})
		if a.cutAfter(i, len(pieces)) {
			if a.t.StreamCut == CutDrop {
				dropStream()
			}
			data, _ := json.Marshal(newErrorBody("server_error", "",
				"The server had an error while processing your request."))
			_, _ = fmt.Fprintf(w, "data: %s\n\n", data)
			_ = rc.Flush()
			return
		}
	}
	for i, call := range a.toolCalls() {
		sendDelta(delta{ToolCalls: []WireToolCall{{
			Index: &i, ID: call.ID, Type: "function", Function: WireFunction{Name: call.Function.Name},
		}}})
		for _, frag := range fragments(call.Function.Arguments, argumentFragment) {
			sendDelta(delta{ToolCalls: []WireToolCall{{Index: &i, Function: WireFunction{Arguments: frag}}}})
		}
	}
	reason := a.t.finishReason()
	send(chunk{Choices: []chunkChoice{{Delta: delta{}, FinishReason: &reason}}})
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage && !a.t.NoUsage {
		send(chunk{Choices: []chunkChoice{}, Usage: usageFor(req, a.t)})
	}
	_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

// cutAfter reports whether a streamed answer breaks off (StreamCut) after the i-th of the n
// words of its content: the last of their first half.
func (a answer) cutAfter(i, n int) bool {
	return a.t.StreamCut != "" && i == (n-1)/2
}

// dropStream ends a streamed answer by closing its connection midway (CutDrop): the handler
// aborts, and the server closes the connection without ending the response.
func dropStream() {
	panic(http.ErrAbortHandler)
}

// words splits text after each run of spaces, so the pieces join back to text.
func words(text string) []string {
	var out []string
	for text != "" {
		i := strings.IndexByte(text, ' ')
		if i < 0 {
			out = append(out, text)
			break
		}
		j := i
		for j < len(text) && text[j] == ' ' {
			j++
		}
		out = append(out, text[:j])
		text = text[j:]
	}
	return out
}

// fragments splits text into pieces of at most n runes.
func fragments(text string, n int) []string {
	var out []string
	for text != "" {
		end, count := 0, 0
		for end < len(text) && count < n {
			_, size := utf8.DecodeRuneInString(text[end:])
			end += size
			count++
		}
		out = append(out, text[:end])
		text = text[end:]
	}
	return out
}
