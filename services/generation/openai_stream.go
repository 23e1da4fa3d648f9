package generation

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"slices"
	"strings"
	"time"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
)

// Stream makes one streamed chat completion, forwarding content, reasoning and tool-call
// fragments as they arrive. A server that answers with plain JSON despite "stream": true is
// read as one answer and forwarded as one delta for the text and one per tool call; an HTML
// page is BAD_RESPONSE (notAStream).
func (o *openAI) Stream(ctx context.Context, req *Request, onDelta func(*generationv1.Delta) error) (*Response, error) {
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()
	resp, err := o.post(ctx, "/chat/completions", o.chatRequest(req, true), true)
	if err != nil {
		return nil, err
	}
	defer closeStream(resp.Body, cancel)
	switch mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt {
	case "application/json":
		return o.streamedJSON(ctx, resp, o.parseCompletion, onDelta)
	case "text/html":
		return nil, o.notAStream(resp, mt)
	}
	return o.readEvents(ctx, cancel, resp.Body, onDelta)
}

// finishGrace is how long a stream that brought its finish_reason, but no usage with it or
// after it, is read on for the usage chunk (stream_options.include_usage) before the answer
// completes without it: a server that never ends the stream made the answer wait out the
// whole provider timeout. OpenAI writes the usage chunk right after the finish.
const finishGrace = 2 * time.Second

// readEvents reads "data:" events until [DONE], accumulating the answer. The answer is
// complete once a chunk has brought its finish_reason: a stream that ends after it, cleanly
// or with its connection lost (before the usage chunk or [DONE]), is the answer, not a
// failure to retry, which would pay for the answer twice. So is one that brought the usage
// with or after the finish_reason, at once, and one that sends nothing more for finishGrace,
// whose cancel (of the request's context) ends the wait. A stream that fails before its finish
// returns the part of the answer received with its failure (Provider.Stream).
func (o *openAI) readEvents(ctx context.Context, cancel context.CancelFunc, body io.Reader,
	onDelta func(*generationv1.Delta) error,
) (*Response, error) {
	acc := newStreamAccumulator()
	var grace *time.Timer
	defer func() {
		if grace != nil {
			grace.Stop()
		}
	}()
	done, err := readSSE(body, func(ev sseEvent) (bool, error) {
		if ev.data == "[DONE]" {
			return true, nil
		}
		usage, err := o.handleChunk(ev.data, acc, onDelta)
		switch {
		case err != nil || !acc.finished:
			return false, err
		case usage:
			return true, nil
		case grace == nil:
			grace = time.AfterFunc(finishGrace, cancel)
		}
		return false, nil
	})
	var rerr *sseReadError
	switch {
	case err != nil && acc.finished && errors.As(err, &rerr):
		// The answer was complete before the stream broke off, or its grace ended.
	case err != nil:
		return acc.response(), o.streamReadError(ctx, err)
	case !done && !acc.finished:
		return acc.response(), o.badResponse("the stream ended without a finish_reason or [DONE]")
	}
	for _, d := range acc.flushHeld() {
		if err := onDelta(d); err != nil {
			return acc.response(), err
		}
	}
	return acc.response(), nil
}

// handleChunk applies one chunk to the answer and forwards its text and tool-call fragments;
// it reports whether the chunk carried usage.
func (o *openAI) handleChunk(payload string, acc *streamAccumulator, onDelta func(*generationv1.Delta) error) (bool, error) {
	var ch chatChunk
	if err := json.Unmarshal([]byte(payload), &ch); err != nil {
		return false, o.badResponse("a stream chunk is not valid JSON (%v): %s", err, snippet([]byte(payload)))
	}
	switch {
	case ch.Error != nil:
		return false, o.errorIn("in the stream", *ch.Error)
	case ch.Object == "error":
		return false, o.errorIn("in the stream", json.RawMessage(payload))
	}
	// The choices are read in place, not copied: copies in this frame and add's put the
	// handler's stack past the 8 KiB it keeps while the answer streams, and the runtime
	// doubled it (an idle streaming run held 7 KiB more: BenchmarkIdleRun).
	for i := range ch.Choices {
		if c := &ch.Choices[i]; c.FinishReason != nil {
			if err := o.finishError(*c.FinishReason); err != nil {
				return false, err
			}
		}
	}
	deltas := acc.add(&ch)
	if acc.size > maxResponseBytes {
		return false, o.answerTooLarge()
	}
	for _, d := range deltas {
		if err := onDelta(d); err != nil {
			return false, err
		}
	}
	return ch.Usage != nil, nil
}

// streamAccumulator assembles a streamed answer.
type streamAccumulator struct {
	model     string
	content   strings.Builder
	reasoning strings.Builder
	// calls are the tool calls in the order they started (until response orders them by
	// slot); last is the latest started.
	calls   []*streamCall
	last    *streamCall
	byIndex map[int]*streamCall
	// placed is how many calls are placed (place): those of the slots 0 to placed-1, whose
	// places in the answer are certain, then those flushHeld placed at the stream's end.
	placed   int
	finish   string
	finished bool
	// refused is set once a delta brought refusal text (delta.refusal), which is content, and
	// makes the stop reason content_filter.
	refused bool
	usage   Usage
	// size is the bytes of text, reasoning and tool calls received (answerTooLarge).
	size int
}

// streamCall is a streamed tool call and its slot, which orders the answer's calls. Once the
// slots below its own are all held, the slot is its place among the answer's calls and the
// index of its fragments' deltas (placed); until then the deltas are held.
type streamCall struct {
	ToolCall
	slot   int
	placed bool
	held   []*generationv1.ToolCallDelta
}

func newStreamAccumulator() *streamAccumulator {
	return &streamAccumulator{byIndex: map[int]*streamCall{}}
}

// add applies a chunk and returns what it adds: a text delta when it carries text (content or
// refusal) or reasoning, then one delta per tool-call fragment that carries something new.
func (a *streamAccumulator) add(ch *chatChunk) []*generationv1.Delta {
	if ch.Model != "" {
		a.model = ch.Model
	}
	if ch.Usage != nil {
		a.usage = ch.Usage.usage()
	}
	text := &generationv1.Delta{}
	var calls []*generationv1.Delta
	for i := range ch.Choices {
		c := &ch.Choices[i]
		text.Content += string(c.Delta.Content) + c.Delta.Refusal
		text.Reasoning += c.Delta.reasoning()
		a.refused = a.refused || c.Delta.Refusal != ""
		for _, frag := range c.Delta.ToolCalls {
			call, d := a.addFragment(frag)
			for _, d := range a.place(call, d) {
				calls = append(calls, &generationv1.Delta{ToolCall: d})
			}
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			a.finish = *c.FinishReason
			a.finished = true
		}
	}
	a.content.WriteString(text.Content)
	a.reasoning.WriteString(text.Reasoning)
	a.size += len(text.Content) + len(text.Reasoning)
	if text.Content == "" && text.Reasoning == "" {
		return calls
	}
	return append([]*generationv1.Delta{text}, calls...)
}

// addFragment merges a tool-call fragment into the call with its index, whatever the calls
// of other indices sent between its fragments; a fragment without an index starts a new call
// when it has an id and continues the last call started otherwise. A fragment whose id
// differs from the id of the call its index holds starts a new call at that index: Ollama's
// OpenAI-compatible API streams every parallel call with index 0, and their arguments merged
// into one call's ran one call with two JSON objects as its arguments. It returns what the
// fragment added (the id and name when it set them, its argument text), or nil when it added
// nothing, with the call.
func (a *streamAccumulator) addFragment(frag wireCall) (*streamCall, *generationv1.ToolCallDelta) {
	var call *streamCall
	switch {
	case frag.Index != nil:
		call = a.byIndex[*frag.Index]
		if call == nil || frag.ID != "" && call.ID != "" && frag.ID != call.ID {
			call = a.newCall(*frag.Index)
			a.byIndex[*frag.Index] = call
		}
	case frag.ID != "" || a.last == nil:
		call = a.newCall(-1)
	default:
		call = a.last
	}
	d := &generationv1.ToolCallDelta{Index: int32(call.slot), Arguments: frag.Function.Arguments}
	if call.ID == "" {
		call.ID, d.Id = frag.ID, frag.ID
	}
	if call.Name == "" {
		call.Name, d.Name = frag.Function.Name, frag.Function.Name
	}
	call.Arguments += frag.Function.Arguments
	a.size += len(d.Id) + len(d.Name) + len(d.Arguments)
	if d.Id == "" && d.Name == "" && d.Arguments == "" {
		return call, nil
	}
	return call, d
}

// place returns the deltas to forward once call's fragment d (nil when it added nothing) is
// in. The deltas of a call are forwarded as they come once its place among the answer's calls
// is certain: the slots below its own are all held, as they are when a server numbers its
// calls 0, 1, 2… (in any order). A call whose index skips one (0 and then 2, a call the server
// dropped, or indices of its own numbering) has its deltas held until the call that fills the
// gap starts, which forwards them, or until the stream ends (flushHeld): forwarded at once
// with the provider's index, they named a place the answer's calls do not have (index 2 of
// two calls), and a client that assembles the calls by index put an empty call in the gap.
func (a *streamAccumulator) place(call *streamCall, d *generationv1.ToolCallDelta) []*generationv1.ToolCallDelta {
	switch {
	case call.placed && d == nil:
		return nil
	case call.placed:
		return []*generationv1.ToolCallDelta{d}
	case d != nil:
		call.held = append(call.held, d)
	}
	if call.slot != a.placed {
		return nil
	}
	var out []*generationv1.ToolCallDelta
	for next := call; next != nil && !next.placed; next = a.slotCall(a.placed) {
		next.placed = true
		a.placed++
		out = append(out, next.held...)
		next.held = nil
	}
	return out
}

// slotCall is the call that holds slot, or nil.
func (a *streamAccumulator) slotCall(slot int) *streamCall {
	for _, c := range a.calls {
		if c.slot == slot {
			return c
		}
	}
	return nil
}

// flushHeld places the calls whose place was not certain when the stream ended, after the
// placed ones in the order of their slots, and returns their held deltas, their index now
// that place (the one they have in the answer, whose calls response orders by slot).
func (a *streamAccumulator) flushHeld() []*generationv1.Delta {
	var rest []*streamCall
	for _, c := range a.calls {
		if !c.placed {
			rest = append(rest, c)
		}
	}
	slices.SortStableFunc(rest, func(x, y *streamCall) int { return cmp.Compare(x.slot, y.slot) })
	var out []*generationv1.Delta
	for _, c := range rest {
		c.placed = true
		for _, d := range c.held {
			d.Index = int32(a.placed)
			out = append(out, &generationv1.Delta{ToolCall: d})
		}
		c.held = nil
		a.placed++
	}
	return out
}

// newCall starts a call. Its slot is index, the provider's, when no call holds that slot yet
// (a call at index 1 that starts before the one at index 0 still comes second); else, and
// for a call without an index (-1), the slot after the highest held.
func (a *streamAccumulator) newCall(index int) *streamCall {
	next, free := 0, index >= 0
	for _, c := range a.calls {
		next = max(next, c.slot+1)
		free = free && c.slot != index
	}
	call := &streamCall{slot: next}
	if free {
		call.slot = index
	}
	a.calls = append(a.calls, call)
	a.last = call
	return call
}

// response is the assembled answer, its tool calls ordered by slot.
func (a *streamAccumulator) response() *Response {
	out := &Response{
		Model:     a.model,
		Content:   a.content.String(),
		Reasoning: a.reasoning.String(),
		Usage:     a.usage,
	}
	slices.SortStableFunc(a.calls, func(x, y *streamCall) int { return cmp.Compare(x.slot, y.slot) })
	for _, c := range a.calls {
		out.ToolCalls = append(out.ToolCalls, c.ToolCall)
	}
	out.FinishReason = normaliseFinish(a.finish, len(out.ToolCalls) > 0)
	if a.refused {
		out.FinishReason = stopContentFilter
	}
	out.ContextFull = contextFull(a.finish)
	return out
}
