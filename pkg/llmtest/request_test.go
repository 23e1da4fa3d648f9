package llmtest_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

func TestMessageDecodesEveryFormOfContent(t *testing.T) {
	for _, c := range []struct {
		json    string
		content string
		blocks  []string // the blocks' types
	}{
		{`{"role":"user","content":"plain text"}`, "plain text", nil},
		{`{"role":"user","content":"quote \" backslash \\ newline \n tab \t é \u00e9"}`, "quote \" backslash \\ newline \n tab \t é é", nil},
		{`{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"calculator","arguments":"{}"}}]}`, "", nil},
		{`{"role":"assistant"}`, "", nil},
		{`{"role":"user","content":[{"type":"text","text":"one "},{"type":"tool_result","tool_use_id":"a","content":"r"},{"type":"text","text":"two"}]}`, "one two", []string{"text", "tool_result", "text"}},
		{"{\"role\":\"user\",\"content\":\"bad \xff byte\"}", "bad \ufffd byte", nil},
	} {
		var m llmtest.Message
		if err := json.Unmarshal([]byte(c.json), &m); err != nil {
			t.Errorf("%s: %v", c.json, err)
			continue
		}
		var types []string
		for _, b := range m.Blocks {
			types = append(types, b.Type)
		}
		if string(m.Content) != c.content || !slices.Equal(types, c.blocks) {
			t.Errorf("%s: content %q blocks %v, want %q %v", c.json, m.Content, types, c.content, c.blocks)
		}
	}
	var m llmtest.Message
	if err := json.Unmarshal([]byte(`{"role":"user","content":{"not":"text"}}`), &m); err == nil {
		t.Error("an object as content was accepted")
	}
}
