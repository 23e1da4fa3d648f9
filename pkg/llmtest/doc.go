// Package llmtest serves a scripted LLM over real OpenAI-compatible HTTP, for tests.
//
// A Scenario is selected by the first user message of a request and answers turn by turn:
// the turn answered is the number of assistant messages the request already holds, so retries
// of one turn hit the same turn. Each turn can inject failures for its first attempts
// (model_error, network_error, timeout, invalid_response, rate_limit, auth_error,
// quota_exceeded) and check what the request carried (tools offered, temperature, top_p,
// tool_choice). The server speaks POST /v1/chat/completions, as JSON or as server-sent events
// when "stream" is true, and POST /v1/embeddings. Requests nothing answers and unmet
// expectations fail the test when it ends.
//
//	srv := llmtest.New(t, llmtest.Scenario{
//		Name:  "weather",
//		Match: "what is the weather*",
//		Turns: []llmtest.Turn{
//			{ToolCalls: []llmtest.ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
//			{Content: "It is sunny in Paris."},
//		},
//	})
//	// point an OpenAI-compatible client at srv.URL(), e.g. http://127.0.0.1:PORT/v1
package llmtest
