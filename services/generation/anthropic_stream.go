package generation

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"strings"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
)

// streamEvent is one event of a streamed message.
type streamEvent struct {
	Type         string            `json:"type"`
	Message      *messagesResponse `json:"message"`
	Index        int               `json:"index"`
	ContentBlock *responseBlock    `json:"content_block"`
	Delta        *streamDelta      `json:"delta"`
	Usage        *anthropicUsage   `json:"usage"`
	Error        *json.RawMessage  `json:"error"`
}

// streamDelta is the delta of content_block_delta and message_delta events.
type streamDelta struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Thinking    string `json:"thinking"`
	Signature   string `json:"signature"`
	PartialJSON string `json:"partial_json"`
	StopReason  string `json:"stop_reason"`
}

// size is the bytes a delta adds to its block; 0 for none.
func (d *streamDelta) size() int {
	if d == nil {
		return 0
	}
	return len(d.Text) + len(d.Thinking) + len(d.Signature) + len(d.PartialJSON)
}

// Stream makes one streamed messages call: text_delta and thinking_delta fragments are
// forwarded as they arrive, and so are the tool calls (id and name when their tool_use block
// starts, then the input_json_delta fragments, or the block's whole input when it streamed
// none); message_delta brings the stop reason and the final usage, and completes the answer
// (message_stop is not waited for: a stream that breaks off after it, or holds it back, is
// still the answer). The content blocks are placed by their index (place): a stream that
// skips indices or starts a block after one of a higher index answers its text and calls in
// the order of the indices. One that breaks the protocol of the blocks (a delta or a stop for
// a block it did not start, a block started or stopped twice, a delta after its block stopped,
// a negative index) is BAD_RESPONSE, naming the index. A server that
// answers with a plain JSON message is read as one answer and forwarded as one delta per text
// and call; an HTML page is BAD_RESPONSE (notAStream). A stream that fails before the answer
// is complete returns the part of it received with its failure (Provider.Stream), whose
// thinking is not remembered for replay.
func (a *anthropic) Stream(ctx context.Context, req *Request, onDelta func(*generationv1.Delta) error) (*Response, error) {
	body, err := buildMessagesRequest(req, a.thinking, true)
	if err != nil {
		return nil, err
	}
	ctx, cancel := a.withTimeout(ctx)
	defer cancel()
	resp, err := a.post(ctx, "/messages", body, true)
	if err != nil {
		return nil, err
	}
	defer closeStream(resp.Body, cancel)
	switch mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt {
	case "application/json":
		return a.streamedJSON(ctx, resp, a.parseMessage, onDelta)
	case "text/html":
		return nil, a.notAStream(resp, mt)
	}
	acc := newMessageAccumulator()
	// started: message_start came; stopped: message_delta brought the stop reason, after every
	// content block ended, so the answer is complete without message_stop.
	started, stopped := false, false
	done, err := readSSE(resp.Body, func(ev sseEvent) (bool, error) {
		var e streamEvent
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
			return false, a.badResponse("a stream event is not valid JSON (%v): %s", err, snippet([]byte(ev.data)))
		}
		if e.Type != "error" && e.Type != "ping" && e.Type != "message_start" && !started {
			return false, a.badResponse("the stream sent %s before message_start", e.Type)
		}
		if strings.HasPrefix(e.Type, "content_block_") && e.Index < 0 {
			return false, a.badResponse("%s for content block %d: a negative index",
				e.Type, e.Index)
		}
		switch e.Type {
		case "message_start":
			if e.Message == nil {
				return false, a.badResponse("message_start without a message")
			}
			started = true
			acc.start(e.Message)
		case "content_block_start":
			return false, a.startBlock(acc, e, onDelta)
		case "content_block_delta":
			if acc.size += e.Delta.size(); acc.size > maxResponseBytes {
				return false, a.answerTooLarge()
			}
			return false, a.applyDelta(acc, e, onDelta)
		case "content_block_stop":
			return false, a.stopBlock(acc, e.Index, onDelta)
		case "message_delta":
			if e.Delta != nil && e.Delta.StopReason != "" {
				acc.stop, stopped = e.Delta.StopReason, true
			}
			acc.usage.merge(e.Usage)
			// Nothing but message_stop follows the stop reason: a server that holds the
			// stream open without it made the answer wait out the provider timeout.
			return stopped, nil
		case "message_stop":
			return true, nil
		case "error":
			raw := []byte(ev.data)
			if e.Error != nil {
				raw = *e.Error
			}
			return false, a.answerError("in the stream", parseErrorBody([]byte(ev.data)), raw)
		}
		return false, nil
	})
	var rerr *sseReadError
	switch {
	case err != nil && stopped && errors.As(err, &rerr):
		// The answer was complete before the stream broke off: asking again would pay twice.
	case err != nil:
		return acc.response(nil), a.streamReadError(ctx, err)
	case !done && !stopped:
		return acc.response(nil), a.badResponse("the stream ended without message_stop")
	}
	if err := acc.placeRest(onDelta); err != nil {
		return acc.response(nil), err
	}
	for _, i := range acc.indices() {
		if err := acc.flushArguments(acc.blocks[i], onDelta); err != nil {
			return acc.response(nil), err
		}
	}
	return acc.response(a.thinking), nil
}

// startBlock starts a content block and forwards the id and name of a tool_use block once
// the block is placed (place).
func (a *anthropic) startBlock(acc *messageAccumulator, e streamEvent, onDelta func(*generationv1.Delta) error) error {
	if e.ContentBlock == nil {
		return a.badResponse("content_block_start without a content_block")
	}
	if _, ok := acc.blocks[e.Index]; ok {
		return a.badResponse("the stream started content block %d twice", e.Index)
	}
	b := acc.addBlock(e.Index, *e.ContentBlock)
	if acc.size > maxResponseBytes {
		return a.answerTooLarge()
	}
	if b.typ == "tool_use" {
		call := &generationv1.ToolCallDelta{Id: b.id, Name: b.name}
		b.held = append(b.held, &generationv1.Delta{ToolCall: call})
	}
	return acc.place(onDelta)
}

// stopBlock ends a content block and forwards the whole input of a tool_use block that
// streamed none.
func (a *anthropic) stopBlock(acc *messageAccumulator, index int,
	onDelta func(*generationv1.Delta) error,
) error {
	b := acc.blocks[index]
	switch {
	case b == nil:
		return a.badResponse("content_block_stop for content block %d, which was not started",
			index)
	case b.stopped:
		return a.badResponse("the stream stopped content block %d twice", index)
	}
	b.stopped = true
	return acc.flushArguments(b, onDelta)
}

// place places the started blocks from acc.next on up to the first index not started, and
// forwards the deltas they held. A block is placed once the blocks of all the indices below
// its own have started, as they have when a stream numbers its blocks 0, 1, 2… (Anthropic
// starts each after the one before it stopped): its place among the answer's blocks, and
// among its tool calls, is then certain. The deltas of a block whose index skips one (0 and
// then 3) are held until the blocks that fill the gap start, or until the stream ends
// (placeRest): forwarded at once, a call started before one of a lower index would have
// named a place that the final answer, ordered by index, gives the other call.
func (m *messageAccumulator) place(onDelta func(*generationv1.Delta) error) error {
	for b := m.blocks[m.next]; b != nil; b = m.blocks[m.next] {
		m.next++
		if err := m.placeBlock(b, onDelta); err != nil {
			return err
		}
	}
	return nil
}

// placeRest places the blocks that a gap left unplaced when the stream ended, in the order of
// their indices, and forwards the deltas they held.
func (m *messageAccumulator) placeRest(onDelta func(*generationv1.Delta) error) error {
	for _, i := range m.indices() {
		if b := m.blocks[i]; !b.placed {
			if err := m.placeBlock(b, onDelta); err != nil {
				return err
			}
		}
	}
	return nil
}

// placeBlock places b, after the blocks placed so far, and forwards the deltas it held.
func (m *messageAccumulator) placeBlock(b *blockState,
	onDelta func(*generationv1.Delta) error,
) error {
	b.placed = true
	if b.typ == "tool_use" {
		b.call = m.calls
		m.calls++
	}
	held := b.held
	b.held = nil
	for _, d := range held {
		if err := b.forward(d, onDelta); err != nil {
			return err
		}
	}
	return nil
}

// send forwards a delta of block b once b is placed, and holds it until then.
func (m *messageAccumulator) send(b *blockState, d *generationv1.Delta,
	onDelta func(*generationv1.Delta) error,
) error {
	if !b.placed {
		b.held = append(b.held, d)
		return nil
	}
	return b.forward(d, onDelta)
}

// forward forwards a delta of the placed block b, a tool-call fragment with the index of b's
// call.
func (b *blockState) forward(d *generationv1.Delta, onDelta func(*generationv1.Delta) error) error {
	if d.ToolCall != nil {
		d.ToolCall.Index = int32(b.call)
	}
	return onDelta(d)
}

// flushArguments forwards the whole input of a tool_use block that streamed no argument
// fragments, once, so that the forwarded fragments always add up to the call's arguments.
func (m *messageAccumulator) flushArguments(b *blockState,
	onDelta func(*generationv1.Delta) error,
) error {
	if b.typ != "tool_use" || b.partial.Len() > 0 || b.flushed {
		return nil
	}
	b.flushed = true
	call := &generationv1.ToolCallDelta{Arguments: b.arguments()}
	return m.send(b, &generationv1.Delta{ToolCall: call}, onDelta)
}

// applyDelta adds a content_block_delta to its block and forwards text, thinking and tool
// input fragments.
func (a *anthropic) applyDelta(acc *messageAccumulator, e streamEvent, onDelta func(*generationv1.Delta) error) error {
	b := acc.blocks[e.Index]
	switch {
	case b == nil:
		return a.badResponse("content_block_delta for content block %d, which was not started",
			e.Index)
	case e.Delta == nil:
		return a.badResponse("content_block_delta for content block %d without a delta", e.Index)
	case b.stopped:
		return a.badResponse("%s for content block %d after it stopped", e.Delta.Type, e.Index)
	}
	switch e.Delta.Type {
	case "text_delta":
		b.text.WriteString(e.Delta.Text)
		if e.Delta.Text != "" {
			return acc.send(b, &generationv1.Delta{Content: e.Delta.Text}, onDelta)
		}
	case "thinking_delta":
		b.text.WriteString(e.Delta.Thinking)
		if e.Delta.Thinking != "" {
			return acc.send(b, &generationv1.Delta{Reasoning: e.Delta.Thinking}, onDelta)
		}
	case "signature_delta":
		b.signature += e.Delta.Signature
	case "input_json_delta":
		if b.typ != "tool_use" {
			return nil // input of a block that takes none
		}
		b.partial.WriteString(e.Delta.PartialJSON)
		if e.Delta.PartialJSON != "" {
			call := &generationv1.ToolCallDelta{Arguments: e.Delta.PartialJSON}
			return acc.send(b, &generationv1.Delta{ToolCall: call}, onDelta)
		}
	}
	return nil
}
