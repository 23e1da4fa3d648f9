package generation

import (
	"fmt"
	"regexp"
	"strings"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// Texts of the rules model.
const (
	rulesGreeting = "Hello! I'm agentmesh's built-in rules model: a deterministic stand-in that runs " +
		"without an LLM provider. I can do arithmetic with the calculator tool, tell the time with " +
		"current_time and search the knowledge base with knowledge_search when those tools are offered."
	rulesFallback = "I'm agentmesh's built-in rules model, so I can't answer that without an LLM provider. " +
		"To get real answers, configure one in agentmesh.yaml under `providers:` (any OpenAI-compatible " +
		"endpoint: OpenAI, Ollama, vLLM, llama.cpp server, LM Studio, OpenRouter) and point `targets:` at it."
	// rulesNoDocumentation answers a knowledge search that found nothing (emptySearchResult)
	// with the RAG contract's exact refusal (seed 002 §3): the sentinel is for the model, not
	// the user.
	rulesNoDocumentation = "I don't have enough information in the current documentation to answer that."
)

// emptySearchResult is knowledge_search's whole result when nothing matches (seed 002 §3).
const emptySearchResult = "DOCUMENTATION_SEARCH_RESULT: EMPTY"

// Limits on how much of a tool result the rules model quotes.
const (
	inlineResultLimit = 200
	quotedResultLimit = 1500
)

var (
	explicitCallRe = regexp.MustCompile(`(?is)\bcall\s+([A-Za-z_][A-Za-z0-9_.\-]*)\s*(.*)$`)
	leadingCallRe  = regexp.MustCompile(`(?i)^(?:please\s+)?call\s+([A-Za-z_][A-Za-z0-9_.\-]*)`)
	greetingRe     = regexp.MustCompile(`(?i)^(hi|hello|hey|hiya|howdy|greetings|good (morning|afternoon|evening)|hola|bonjour|yo)\b`)
	timeRe         = regexp.MustCompile(`(?i)\b(time|date|today|clock|what day|which day|day is it)\b`)
	searchRe       = regexp.MustCompile(`(?i)\b(search|look\s*up|find|documentation|docs|knowledge base|according to)\b`)
	searchLeadRe   = regexp.MustCompile(`(?i)^(please\s+)?((can|could) you\s+)?(search(\s+(in\s+)?the)?(\s+(docs|documentation|knowledge base))?(\s+for)?|look\s*up|find(\s+me)?)\s+`)
	searchTailRe   = regexp.MustCompile(`(?i)\s+(in|from)\s+the\s+(docs|documentation|knowledge base)$`)
)

// decide applies the rules in order: answer a tool result, an explicit call, a greeting, a
// time question, arithmetic, a search; else the fallback.
func (c conversation) decide() decision {
	msgs := c.req.Messages
	if n := len(msgs); n > 0 && msgs[n-1].GetRole() == typev1.Role_ROLE_TOOL {
		return decision{text: c.toolResultsAnswer()}
	}
	text := c.lastUserMessage()
	if d, ok := c.explicitCall(text); ok {
		return d
	}
	if greetingRe.MatchString(text) && len(strings.Fields(text)) <= 8 {
		return decision{text: rulesGreeting}
	}
	if c.offers("current_time") && timeRe.MatchString(text) {
		return call("current_time", map[string]any{})
	}
	if c.offers("calculator") {
		if expr, ok := arithmetic(text); ok {
			return call("calculator", map[string]string{"expression": expr})
		}
	}
	if c.offers("knowledge_search") && searchRe.MatchString(text) {
		return call("knowledge_search", map[string]string{"query": searchQuery(text)})
	}
	return decision{text: rulesFallback}
}

// explicitCall handles "call <tool> {json}" naming an offered tool; a message that starts
// with "call <tool>" naming a tool that is not offered gets a text answer saying so.
func (c conversation) explicitCall(text string) (decision, bool) {
	if m := explicitCallRe.FindStringSubmatch(text); m != nil && c.offers(m[1]) {
		args := strings.TrimSpace(m[2])
		if !strings.HasPrefix(args, "{") {
			args = "{}"
		}
		return decision{tool: m[1], args: args}, true
	}
	if m := leadingCallRe.FindStringSubmatch(text); m != nil {
		offered := "no tools are offered"
		if names := c.toolNames(); len(names) > 0 {
			offered = "the offered tools are " + strings.Join(names, ", ")
		}
		return decision{text: fmt.Sprintf("I can't call %s: it is not offered in this request (%s).", m[1], offered)}, true
	}
	return decision{}, false
}

// toolResultsAnswer quotes the tool results that end the conversation; a knowledge search that
// found nothing is answered with the refusal instead.
func (c conversation) toolResultsAnswer() string {
	msgs := c.req.Messages
	start := len(msgs)
	for start > 0 && msgs[start-1].GetRole() == typev1.Role_ROLE_TOOL {
		start--
	}
	var lines []string
	for _, m := range msgs[start:] {
		if strings.TrimSpace(m.GetContent()) == emptySearchResult {
			lines = append(lines, rulesNoDocumentation)
			continue
		}
		lines = append(lines, resultSentence(c.toolName(m), m.GetContent()))
	}
	return strings.Join(lines, "\n")
}

// toolName is the name of the tool a tool message answers: its name, else the name of the
// call it answers, else "the tool".
func (c conversation) toolName(m *typev1.Message) string {
	if m.GetName() != "" {
		return m.GetName()
	}
	for _, prev := range c.req.Messages {
		for _, tc := range prev.GetToolCalls() {
			if tc.GetId() == m.GetToolCallId() && tc.GetName() != "" {
				return tc.GetName()
			}
		}
	}
	return "the tool"
}

// resultSentence quotes one tool result: inline when short and on one line, else as a block
// truncated at a word boundary.
func resultSentence(name, result string) string {
	result = strings.TrimSpace(result)
	switch {
	case result == "":
		return name + " returned nothing."
	case len(result) <= inlineResultLimit && !strings.Contains(result, "\n"):
		if strings.ContainsAny(result[len(result)-1:], ".!?") {
			return name + " returned " + result
		}
		return name + " returned " + result + "."
	}
	return name + " returned:\n" + truncate(result, quotedResultLimit)
}

// searchQuery strips the request phrasing around what to search for.
func searchQuery(text string) string {
	q := strings.TrimRight(strings.TrimSpace(text), "?.! ")
	q = searchLeadRe.ReplaceAllString(q, "")
	q = searchTailRe.ReplaceAllString(q, "")
	if q = strings.TrimSpace(q); q == "" {
		return strings.TrimSpace(text)
	}
	return q
}
