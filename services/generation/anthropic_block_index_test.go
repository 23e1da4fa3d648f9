package generation_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/generation"
	"google.golang.org/grpc/codes"
)

// Events of an Anthropic Messages stream, for the tests of its content blocks' indices.
const (
	blocksMessageStart = "event: message_start\ndata: " +
		`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",` +
		`"model":"m","content":[]}}` + "\n\n"
	blocksMessageEnd = "event: message_delta\ndata: " +
		`{"type":"message_delta","delta":{"stop_reason":"tool_use"}}` + "\n\n" +
		"event: message_stop\ndata: " + `{"type":"message_stop"}` + "\n\n"
)

// toolBlockStart starts the tool_use block toolu_<id> at index.
func toolBlockStart(index int, id string) string {
	return "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":" +
		strconv.Itoa(index) + ",\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_" + id +
		"\",\"name\":\"write_file\",\"input\":{}}}\n\n"
}

// textBlockStart starts a text block at index.
func textBlockStart(index int) string {
	return "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":" +
		strconv.Itoa(index) + ",\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
}

// blockDelta is a content_block_delta of the given type for the block at index, whose text
// goes in field (text, partial_json).
func blockDelta(index int, typ, field, text string) string {
	return "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":" +
		strconv.Itoa(index) + ",\"delta\":{\"type\":\"" + typ + "\",\"" + field + "\":" +
		strconv.Quote(text) + "}}\n\n"
}

// inputDelta is an input_json_delta for the block at index.
func inputDelta(index int, partial string) string {
	return blockDelta(index, "input_json_delta", "partial_json", partial)
}

// textDelta is a text_delta for the block at index.
func textDelta(index int, text string) string {
	return blockDelta(index, "text_delta", "text", text)
}

// blockStop stops the block at index.
func blockStop(index int) string {
	return "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":" +
		strconv.Itoa(index) + "}\n\n"
}

// TestAnthropicBlocksPlacedByIndex: the content blocks of a streamed message are placed by
// their index, as OpenAI's streamed calls are: a message whose indices skip numbers, or whose
// blocks start out of order, answers its text and calls ordered by index, and the deltas'
// tool-call indices are the calls' positions in the final answer (Delta.tool_call.index),
// whatever order the blocks started in. A block started after one of a higher index came
// after it: the text and the calls came out in the order the blocks started.
func TestAnthropicBlocksPlacedByIndex(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string
		content string
		calls   []string // id raw arguments, in order
	}{
		{
			name: "a gap after a text block",
			body: textBlockStart(0) + textDelta(0, "Writing.") + blockStop(0) +
				toolBlockStart(3, "d") + inputDelta(3, `{"path":`) + inputDelta(3, `"d"}`) +
				blockStop(3),
			content: "Writing.",
			calls:   []string{`toolu_d {"path":"d"}`},
		},
		{
			name: "the later index first",
			body: toolBlockStart(3, "d") + inputDelta(3, `{"path":`) +
				toolBlockStart(1, "b") + inputDelta(1, `{"path":"b"}`) + inputDelta(3, `"d"}`) +
				blockStop(3) + blockStop(1),
			calls: []string{`toolu_b {"path":"b"}`, `toolu_d {"path":"d"}`},
		},
		{
			name: "a gap filled later",
			body: toolBlockStart(0, "a") + inputDelta(0, `{"path":"a"}`) + blockStop(0) +
				toolBlockStart(2, "c") + inputDelta(2, `{"path":"c"}`) + blockStop(2) +
				toolBlockStart(1, "b") + blockStop(1),
			calls: []string{`toolu_a {"path":"a"}`, `toolu_b {}`, `toolu_c {"path":"c"}`},
		},
		{
			name: "text blocks out of order",
			body: textBlockStart(2) + textDelta(2, "world.") + blockStop(2) +
				textBlockStart(0) + textDelta(0, "Hello, ") + blockStop(0) +
				toolBlockStart(4, "e") + blockStop(4),
			content: "Hello, world.",
			calls:   []string{`toolu_e {}`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := replyingSSE(blocksMessageStart + tc.body + blocksMessageEnd)(t)
			provider := anthropicAt(t, url, nil)
			client := serveProviders(t, map[string]generation.Provider{"anthropic": provider})
			req := request("anthropic", "claude-test", user("write them"))
			req.Tools = []*typev1.Tool{tool("write_file", "path")}
			deltas, final, err := streamAll(t, client, req)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range final.GetToolCalls() {
				got = append(got, c.GetId()+" "+c.GetRawArguments())
			}
			if !slices.Equal(got, tc.calls) || final.GetContent() != tc.content {
				t.Fatalf("final content %q calls %q, want %q %q",
					final.GetContent(), got, tc.content, tc.calls)
			}
			content, _, _ := joinDeltas(deltas)
			if content != tc.content {
				t.Errorf("text deltas add up to %q, the final content is %q", content, tc.content)
			}
			streamed := map[int32]*streamedCall{}
			for _, d := range deltas {
				f := d.GetToolCall()
				if f == nil {
					continue
				}
				if streamed[f.GetIndex()] == nil {
					streamed[f.GetIndex()] = &streamedCall{}
				}
				c := streamed[f.GetIndex()]
				c.id += f.GetId()
				c.name += f.GetName()
				c.arguments += f.GetArguments()
			}
			if len(streamed) != len(tc.calls) {
				t.Errorf("fragments of %d calls, want %d", len(streamed), len(tc.calls))
			}
			for i, c := range final.GetToolCalls() {
				s := streamed[int32(i)]
				if s == nil || s.id != c.GetId() || s.name != c.GetName() ||
					s.arguments != c.GetRawArguments() {
					t.Errorf("fragments with index %d are %+v, the final call %d is %v", i, s, i, c)
				}
			}
		})
	}
}

// TestAnthropicStreamRejectsMalformedBlocks: a stream whose content blocks break the protocol
// (a delta or a stop for a block it never started, a block started or stopped twice, a delta
// after its block stopped, a negative index) is a malformed answer, BAD_RESPONSE, whose message
// names the block's index. A stop for a block never started, a second stop and a delta after a
// stop with the block's input already streamed were taken silently.
func TestAnthropicStreamRejectsMalformedBlocks(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{
			name: "a delta before its block started",
			body: toolBlockStart(0, "a") + inputDelta(2, `{}`) + blockStop(0),
			want: "content_block_delta for content block 2, which was not started",
		},
		{
			name: "a stop for a block never started",
			body: toolBlockStart(0, "a") + blockStop(0) + blockStop(5),
			want: "content_block_stop for content block 5, which was not started",
		},
		{
			name: "a block started twice after a gap",
			body: toolBlockStart(0, "a") + toolBlockStart(3, "d") + toolBlockStart(3, "e"),
			want: "the stream started content block 3 twice",
		},
		{
			name: "a block stopped twice",
			body: toolBlockStart(0, "a") + inputDelta(0, `{}`) + blockStop(0) + blockStop(0),
			want: "the stream stopped content block 0 twice",
		},
		{
			name: "input after the block stopped, after input fragments",
			body: toolBlockStart(1, "a") + inputDelta(1, `{"path":"a"}`) + blockStop(1) +
				inputDelta(1, ` `),
			want: "input_json_delta for content block 1 after it stopped",
		},
		{
			name: "text after the block stopped",
			body: textBlockStart(0) + textDelta(0, "Hello") + blockStop(0) + textDelta(0, " again"),
			want: "text_delta for content block 0 after it stopped",
		},
		{
			name: "a negative index",
			body: toolBlockStart(-1, "a") + blockStop(-1),
			want: "content_block_start for content block -1: a negative index",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := replyingSSE(blocksMessageStart + tc.body + blocksMessageEnd)(t)
			provider := anthropicAt(t, url, nil)
			client := serveProviders(t, map[string]generation.Provider{"anthropic": provider})
			_, _, err := streamAll(t, client, request("anthropic", "claude-test", user("x")))
			se := stageError(t, err, codes.Unavailable)
			if se.Class != typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE ||
				!strings.Contains(se.Msg, tc.want) {
				t.Errorf("error %v %q, want BAD_RESPONSE %q", se.Class, se.Msg, tc.want)
			}
		})
	}
}
