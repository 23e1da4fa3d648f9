package llmtest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// streamChunk is the part of a streamed chunk the tests read.
type streamChunk struct {
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Role             string                 `json:"role"`
			Content          string                 `json:"content"`
			ReasoningContent string                 `json:"reasoning_content"`
			ToolCalls        []llmtest.WireToolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func TestStreamFraming(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "stream", Turns: []llmtest.Turn{{
		Reasoning: "Let me think about it.",
		Content:   "The answer is forty two.",
		ToolCalls: []llmtest.ToolCall{
			{Name: "calculator", Arguments: `{"expression":"6*7","précision":2}`},
			{Name: "clock", Arguments: `{}`},
		},
		FinishReason: "tool_calls",
		Usage:        &llmtest.Usage{PromptTokens: 20, CompletionTokens: 9},
	}}})
	client := newClient(t)

	body := chatBody("user", "stream")
	body["stream"] = true
	body["stream_options"] = map[string]any{"include_usage": true}
	resp, raw := post(t, client, srv.URL()+"/chat/completions", body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	frames := sseFrames(t, raw)
	if frames[len(frames)-1] != "[DONE]" {
		t.Fatalf("last frame = %q, want [DONE]", frames[len(frames)-1])
	}
	chunks := make([]streamChunk, 0, len(frames)-1)
	for _, f := range frames[:len(frames)-1] {
		var c streamChunk
		if err := json.Unmarshal([]byte(f), &c); err != nil {
			t.Fatalf("frame %q: %v", f, err)
		}
		if c.Object != "chat.completion.chunk" {
			t.Errorf("object = %q", c.Object)
		}
		chunks = append(chunks, c)
	}

	var content, reasoning strings.Builder
	var contentDeltas, argFragments int
	calls := map[int]*llmtest.WireToolCall{}
	var finish []string
	for i, c := range chunks[:len(chunks)-1] {
		if len(c.Choices) != 1 {
			t.Fatalf("chunk %d has %d choices", i, len(c.Choices))
		}
		d := c.Choices[0].Delta
		if d.Content != "" {
			contentDeltas++
		}
		content.WriteString(d.Content)
		reasoning.WriteString(d.ReasoningContent)
		for _, tc := range d.ToolCalls {
			if tc.Index == nil {
				t.Fatalf("tool call fragment without index: %+v", tc)
			}
			call, seen := calls[*tc.Index]
			if !seen {
				if tc.ID == "" || tc.Function.Name == "" || tc.Function.Arguments != "" {
					t.Errorf("first fragment of call %d = %+v, want id and name only", *tc.Index, tc)
				}
				calls[*tc.Index] = &llmtest.WireToolCall{ID: tc.ID, Function: llmtest.WireFunction{Name: tc.Function.Name}}
				continue
			}
			if tc.ID != "" || tc.Function.Name != "" {
				t.Errorf("later fragment repeats id or name: %+v", tc)
			}
			call.Function.Arguments += tc.Function.Arguments
			argFragments++
		}
		if fr := c.Choices[0].FinishReason; fr != nil {
			finish = append(finish, *fr)
		}
	}
	if chunks[0].Choices[0].Delta.Role != "assistant" {
		t.Error("first chunk does not carry the assistant role")
	}
	if content.String() != "The answer is forty two." || contentDeltas < 3 {
		t.Errorf("content %q in %d deltas, want it split into several", content.String(), contentDeltas)
	}
	if reasoning.String() != "Let me think about it." {
		t.Errorf("reasoning = %q", reasoning.String())
	}
	if len(calls) != 2 || calls[0].ID != "call_0_1" || calls[0].Function.Name != "calculator" ||
		calls[0].Function.Arguments != `{"expression":"6*7","précision":2}` || calls[1].Function.Arguments != "{}" {
		t.Errorf("reassembled calls = %+v %+v", calls[0], calls[1])
	}
	if argFragments < 4 {
		t.Errorf("arguments came in %d fragments, want them split", argFragments)
	}
	if len(finish) != 1 || finish[0] != "tool_calls" || chunks[len(chunks)-2].Choices[0].FinishReason == nil {
		t.Errorf("finish reasons %q; the last choice chunk must carry it", finish)
	}
	usage := chunks[len(chunks)-1]
	if usage.Choices == nil || len(usage.Choices) != 0 || usage.Usage == nil ||
		usage.Usage.PromptTokens != 20 || usage.Usage.CompletionTokens != 9 {
		t.Errorf("usage chunk = %+v, want empty choices and the usage", usage)
	}
	if !strings.Contains(frames[len(frames)-2], `"choices":[]`) {
		t.Errorf("usage chunk must send an empty choices array: %s", frames[len(frames)-2])
	}
}

func TestStreamWithoutUsage(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "s", Turns: []llmtest.Turn{{Content: "ok"}}})
	body := chatBody("user", "s")
	body["stream"] = true
	_, raw := post(t, newClient(t), srv.URL()+"/chat/completions", body)
	frames := sseFrames(t, raw)
	// role, one content delta, finish, [DONE]
	if len(frames) != 4 || strings.Contains(string(raw), `"usage"`) {
		t.Errorf("frames = %q, want no usage chunk", frames)
	}
	if !strings.Contains(frames[2], `"finish_reason":"stop"`) {
		t.Errorf("finish frame = %s", frames[2])
	}
}

// TestNoUsage: a turn with NoUsage answers without usage, as some OpenAI-compatible servers
// do: no "usage" in a completion, and no usage chunk in a stream that asks for one.
func TestNoUsage(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "Hi.", NoUsage: true}, {Content: "Hi again.", NoUsage: true}}})
	client := newClient(t)

	_, raw := post(t, client, srv.URL()+"/chat/completions", chatBody("user", "hello"))
	if strings.Contains(string(raw), `"usage"`) || !strings.Contains(string(raw), "Hi.") {
		t.Errorf("completion %s, want the answer without usage", raw)
	}
	body := chatBody("user", "hello")
	body["stream"] = true
	body["stream_options"] = map[string]any{"include_usage": true}
	_, raw = post(t, client, srv.URL()+"/chat/completions", body)
	frames := sseFrames(t, raw)
	if frames[len(frames)-1] != "[DONE]" {
		t.Fatalf("last frame = %q, want [DONE]", frames[len(frames)-1])
	}
	for _, f := range frames {
		if strings.Contains(f, `"usage"`) {
			t.Errorf("frame %s reports usage", f)
		}
	}
}
