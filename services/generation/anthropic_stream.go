package generation

import (
	"context"
	"encoding/json"
	"errors"
	"mime"

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
// still the answer). A server that
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
			if b := acc.blocks[e.Index]; b != nil {
				return false, b.flushArguments(onDelta)
			}
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
	for _, i := range acc.order {
		if err := acc.blocks[i].flushArguments(onDelta); err != nil {
			return acc.response(nil), err
		}
	}
	return acc.response(a.thinking), nil
}

// startBlock starts a content block and forwards the id and name of a tool_use block.
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
	if b.typ != "tool_use" {
		return nil
	}
	return onDelta(&generationv1.Delta{ToolCall: &generationv1.ToolCallDelta{Index: int32(b.call), Id: b.id, Name: b.name}})
}

// flushArguments forwards the whole input of a tool_use block that streamed no argument
// fragments, once, so that the forwarded fragments always add up to the call's arguments.
func (b *blockState) flushArguments(onDelta func(*generationv1.Delta) error) error {
	if b.typ != "tool_use" || b.partial.Len() > 0 || b.flushed {
		return nil
	}
	b.flushed = true
	return onDelta(&generationv1.Delta{ToolCall: &generationv1.ToolCallDelta{Index: int32(b.call), Arguments: b.arguments()}})
}

// applyDelta adds a content_block_delta to its block and forwards text, thinking and tool
// input fragments.
func (a *anthropic) applyDelta(acc *messageAccumulator, e streamEvent, onDelta func(*generationv1.Delta) error) error {
	b := acc.blocks[e.Index]
	if b == nil || e.Delta == nil {
		return a.badResponse("content_block_delta for block %d, which was not started", e.Index)
	}
	switch e.Delta.Type {
	case "text_delta":
		b.text.WriteString(e.Delta.Text)
		if e.Delta.Text != "" {
			return onDelta(&generationv1.Delta{Content: e.Delta.Text})
		}
	case "thinking_delta":
		b.text.WriteString(e.Delta.Thinking)
		if e.Delta.Thinking != "" {
			return onDelta(&generationv1.Delta{Reasoning: e.Delta.Thinking})
		}
	case "signature_delta":
		b.signature += e.Delta.Signature
	case "input_json_delta":
		if b.typ != "tool_use" {
			return nil // input of a block that takes none
		}
		if b.flushed {
			return a.badResponse("input_json_delta for content block %d after it stopped", e.Index)
		}
		b.partial.WriteString(e.Delta.PartialJSON)
		if e.Delta.PartialJSON != "" {
			return onDelta(&generationv1.Delta{ToolCall: &generationv1.ToolCallDelta{Index: int32(b.call), Arguments: e.Delta.PartialJSON}})
		}
	}
	return nil
}
