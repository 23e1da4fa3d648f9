package memory

import (
	"context"
	"fmt"
	"strings"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/ask"
	"github.com/agentmesh/agentmesh/pkg/textcut"
)

// What the memory stage asks models.memory about a finished run.
const (
	// FactsTool is the tool whose arguments are the model's answer.
	FactsTool = "remember_facts"
	// FactsInstructions is the system message of the request.
	FactsInstructions = "You maintain the long-term memory of an AI assistant about one user. Read the conversation " +
		"below, which has just ended, and pick the facts about the user worth remembering in later conversations: " +
		"what they asked you to remember, their preferences, personal details they shared (name, location, work, " +
		"allergies, people and things in their life), decisions and commitments. Leave out questions, small talk, " +
		"the details of the task at hand that will not matter later, what the assistant said unless the user " +
		"confirmed it, and never keep passwords, keys, tokens or payment details. Write each fact as one short " +
		"sentence that stands on its own, about \"the user\" (\"The user's name is Sam.\"), and rate its " +
		"importance from 0 (trivia) to 1 (must never be forgotten; something the user asked you to remember is " +
		"at least 0.8). Call " + FactsTool + " once, with an empty list when nothing is worth remembering."
	// factsDescription tells the model what the tool's arguments mean.
	factsDescription = "Store the facts about the user worth remembering, each with its importance."
	// FactsMaxOutputTokens bounds the answer, unless Options.Facts sets its own bound.
	FactsMaxOutputTokens = 2048
	// maxConversationBytes bounds the conversation sent: the user's messages first, then the
	// assistant's, each at most maxMessageBytes (conversationText).
	maxConversationBytes = 32 << 10
	maxMessageBytes      = 4 << 10
)

// FactsSchema is the JSON schema of the model's answer.
var FactsSchema = map[string]any{
	"type":                 "object",
	"required":             []any{"facts"},
	"additionalProperties": false,
	"properties": map[string]any{
		"facts": map[string]any{
			"type":     "array",
			"maxItems": MaxFactsPerRun,
			"items": map[string]any{
				"type":                 "object",
				"required":             []any{"text", "importance"},
				"additionalProperties": false,
				"properties": map[string]any{
					"text":       map[string]any{"type": "string", "minLength": 1, "maxLength": MaxFactBytes},
					"importance": map[string]any{"type": "number", "minimum": 0, "maximum": 1},
				},
			},
		},
	},
}

// factsAnswer is the model's answer, as FactsSchema describes it.
type factsAnswer struct {
	Facts []struct {
		Text       string  `json:"text"`
		Importance float64 `json:"importance"`
	} `json:"facts"`
}

// pickFacts picks the facts of a finished run: by the configured model, falling back to the
// rules when it fails, answers outside FactsSchema or has not answered within factsTimeout
// (learned says which picked them, why the rules did, and accounts the model's request), or
// by the rules without a model.
func (s *Service) pickFacts(ctx context.Context, runID string, result *typev1.RunResult, learned *typev1.RunLearning) []fact {
	conversation := conversationText(result.GetConversation())
	if s.facts == nil || conversation == "" {
		learned.Method = typev1.LearningMethod_LEARNING_METHOD_RULES
		return ruleFacts(result.GetConversation())
	}
	var answer factsAnswer
	mctx, cancel := context.WithTimeout(ctx, s.factsTimeout)
	defer cancel()
	ans, err := s.facts.Object(mctx, ask.Question{
		RunID: runID, Instructions: FactsInstructions, Tool: FactsTool, Description: factsDescription,
		Schema: FactsSchema, Input: conversation, KeepEnd: true, // cut to fit, the newest is kept
	}, &answer)
	entry := ans.Entry // the request's accounting, made by pkg/ask
	if entry != nil {
		learned.Accounting = append(learned.Accounting, entry)
	}
	if err != nil && ctx.Err() != nil {
		return nil // closing, or out of time: the run is learned from again
	}
	if err != nil {
		if ask.TimedOut(mctx) {
			err = fmt.Errorf("the memory model did not answer within %s: %w", s.factsTimeout, err)
		}
		s.log.WarnContext(ctx, "the memory model failed; the rules pick the facts", "run_id", runID, "error", err)
		learned.Method, learned.FallbackReason = typev1.LearningMethod_LEARNING_METHOD_RULES, err.Error()
		return ruleFacts(result.GetConversation())
	}
	learned.Method = typev1.LearningMethod_LEARNING_METHOD_MODEL
	facts := make([]fact, 0, len(answer.Facts))
	for _, f := range answer.Facts {
		if text := strings.TrimSpace(f.Text); text != "" {
			facts = append(facts, fact{text: text, importance: f.Importance})
		}
	}
	return facts
}

// conversationText is what the model reads of a conversation: the user's and the assistant's
// messages with text, oldest first, as "User: …" and "Assistant: …" paragraphs, within
// maxConversationBytes. The facts are about the user, so the user's messages take the room
// first, newest first, and the assistant's fill what is left, newest first; a message over
// maxMessageBytes keeps its beginning and its end (where a request to remember often is).
func conversationText(conversation []*typev1.Message) string {
	type para struct {
		text string
		user bool
	}
	var paras []para
	for _, m := range conversation {
		var who string
		switch m.GetRole() {
		case typev1.Role_ROLE_USER:
			who = "User: "
		case typev1.Role_ROLE_ASSISTANT:
			who = "Assistant: "
		default:
			continue
		}
		if text := strings.TrimSpace(m.GetContent()); text != "" {
			paras = append(paras, para{who + textcut.Middle(text, maxMessageBytes, " … "), who == "User: "})
		}
	}
	keep := make([]bool, len(paras))
	size := 0 // of the paragraphs kept, each with the blank line that joins it
	for _, user := range []bool{true, false} {
		for i := len(paras) - 1; i >= 0; i-- {
			if paras[i].user != user {
				continue
			}
			if size+len(paras[i].text) > maxConversationBytes {
				break // older messages of the role are left out
			}
			keep[i], size = true, size+len(paras[i].text)+2
		}
	}
	var kept []string
	for i, p := range paras {
		if keep[i] {
			kept = append(kept, p.text)
		}
	}
	return strings.Join(kept, "\n\n")
}
