package memory

import (
	"slices"
	"strings"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

func TestRuleFacts(t *testing.T) {
	asked := func(text string) fact { return fact{text: text, importance: importanceAsked} }
	stated := func(text string) fact { return fact{text: text, importance: importanceStated} }
	table := []struct {
		name    string
		message string
		want    []fact
	}{
		{"a request to remember a statement", "Remember that my favourite colour is green.", []fact{asked("The user's favourite colour is green.")}},
		{"fillers and other cues", "Hi! Please don't forget: I live in Lisbon", []fact{asked("The user lives in Lisbon.")}},
		{"a request to remember anything else", "Keep in mind that the cat needs her pills at 8pm.",
			[]fact{asked("The user asked to remember: the cat needs her pills at 8pm.")}},
		{"a polite request", "I want you to remember that I'm allergic to peanuts!", []fact{asked("The user is allergic to peanuts.")}},
		{"statements", "My name is Sam. I work at Acme as a pilot. Call me Sammy.",
			[]fact{stated("The user's name is Sam."), stated("The user works at Acme as a pilot."), stated("The user wants to be called Sammy.")}},
		{"several per line", "btw my dogs are Rex and Fido\nI prefer tea over coffee", []fact{stated("The user's dogs are Rex and Fido."), stated("The user prefers tea over coffee.")}},
		{"questions are no facts", "What is my favourite colour? Do you remember that my name is Sam?", nil},
		{"a reminder is no fact", "Remember to call mom.", nil},
		{"secrets are never kept", "Remember that my password is hunter2. My API key is sk-123.", nil},
		{"mid-sentence mentions are no statements", "I think my code is broken.", nil},
		{"no facts", "What is 6 times 7?", nil},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			got := ruleFacts([]*typev1.Message{
				{Role: typev1.Role_ROLE_SYSTEM, Content: "My name is Agent."},
				{Role: typev1.Role_ROLE_USER, Content: tc.message},
				{Role: typev1.Role_ROLE_ASSISTANT, Content: "Remember that my name is Bot."},
			})
			if !slices.Equal(got, tc.want) {
				t.Errorf("ruleFacts(%q) = %v, want %v", tc.message, got, tc.want)
			}
		})
	}
	t.Run("at most MaxFactsPerRun", func(t *testing.T) {
		got := ruleFacts([]*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: strings.Repeat("My name is Sam. ", MaxFactsPerRun+5)}})
		if len(got) != MaxFactsPerRun {
			t.Errorf("%d facts, want %d", len(got), MaxFactsPerRun)
		}
	})
}

func TestConversationText(t *testing.T) {
	conv := []*typev1.Message{
		{Role: typev1.Role_ROLE_SYSTEM, Content: "You are agentmesh."},
		{Role: typev1.Role_ROLE_USER, Content: "My name is Sam."},
		{Role: typev1.Role_ROLE_ASSISTANT, ToolCalls: []*typev1.ToolCall{{Id: "c1", Name: "calculator"}}},
		{Role: typev1.Role_ROLE_TOOL, Content: "42", ToolCallId: "c1"},
		{Role: typev1.Role_ROLE_ASSISTANT, Content: "Nice to meet you, Sam."},
	}
	if got, want := conversationText(conv), "User: My name is Sam.\n\nAssistant: Nice to meet you, Sam."; got != want {
		t.Errorf("conversationText = %q, want %q", got, want)
	}
	long := []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "the oldest"}}
	for range 2 * maxConversationBytes / maxMessageBytes {
		long = append(long, &typev1.Message{Role: typev1.Role_ROLE_USER, Content: strings.Repeat("y ", maxMessageBytes)})
	}
	got := conversationText(long)
	if strings.Contains(got, "the oldest") || !strings.HasSuffix(got, "y y") ||
		!strings.Contains(got, "y … y") || len(got) > maxConversationBytes {
		t.Errorf("a long conversation is sent as %d bytes starting %q: want the newest messages, "+
			"each cut in its middle, within %d bytes", len(got), got[:40], maxConversationBytes)
	}
}
