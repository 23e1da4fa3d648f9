package tokens

import typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"

// FitsWindow returns the tokens a request of messages and tools costs model (its Counter,
// ForModel) and whether, with buffer tokens of safety margin and output tokens of answer, it
// fits within the model's context window: need + buffer + output <= window. A window of 0 or
// less is no known window: every request fits it, and nothing is counted (need is 0).
func FitsWindow(model string, messages []*typev1.Message, tools []*typev1.Tool,
	window, buffer, output int64) (need int64, fits bool) {
	if window <= 0 {
		return 0, true
	}
	counter := ForModel(model)
	need = counter.Messages(messages) + counter.Tools(tools)
	return need, need+buffer+output <= window
}
