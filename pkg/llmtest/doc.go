// Package llmtest serves a scripted LLM over real HTTP, for tests, speaking both the
// OpenAI-compatible chat completions API and the Anthropic Messages API.
//
// A Scenario is selected by the first user message of a request and answers turn by turn:
// the turn answered is the number of assistant messages the request already holds, so retries
// of one turn hit the same turn. Each turn can inject failures for its first attempts
// (model_error, network_error, timeout, invalid_response, rate_limit with its Retry-After,
// auth_error, quota_exceeded, overloaded, bad_request), each in the error format of the API
// asked, and check what the request carried (tools offered, temperature, top_p, tool_choice,
// max_tokens, max_completion_tokens, reasoning_effort, thinking budget, stop sequences). Its
// answer can be cut off (FinishReason "length"), break off midway when streamed (StreamCut:
// the connection dropped, or an error event) and report another model than the one asked
// for (Model), as providers report a dated snapshot of an alias; the model can refuse
// (Refusal: OpenAI's message.refusal and delta.refusal), and a turn can answer with a
// redirect instead (Redirect, RedirectStatus). A turn can also be slowed
// down: each of its requests waits DelayMS, then until the test closes its Hold channel, so a
// test can kill the process that asked while the inference is in flight; a request whose
// client goes away stops waiting at once. A turn's Respond function can write the answer from
// the request instead, for answers that depend on it (a nonce the request announces, a notice
// sent with a retry). The server speaks:
//
//   - POST /v1/chat/completions, as JSON or as server-sent events when "stream" is true, with
//     reasoning_content, tool-call argument fragments and usage in the last chunk. It rejects,
//     as the real API does, max_tokens for the reasoning models (o1, o3, o4-mini, gpt-5…),
//     which take max_completion_tokens;
//   - POST /v1/messages, Anthropic's JSON and event stream (message_start, content_block_*
//     with text_delta, thinking_delta, signature_delta and input_json_delta, message_delta
//     with stop_reason and usage, message_stop), with signed thinking blocks (see Sign). It
//     rejects, as the real API does, requests without anthropic-version or max_tokens, bad
//     thinking budgets, tampered thinking signatures, and tool-use continuations that drop
//     the thinking block while thinking is enabled;
//   - POST /v1/embeddings.
//
// Requests nothing answers and unmet expectations fail the test when it ends.
//
//	srv := llmtest.New(t, llmtest.Scenario{
//		Name:  "weather",
//		Match: "what is the weather*",
//		Turns: []llmtest.Turn{
//			{ToolCalls: []llmtest.ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
//			{Content: "It is sunny in Paris."},
//		},
//	})
//	// point an OpenAI-compatible or Anthropic client at srv.URL(), e.g. http://127.0.0.1:PORT/v1
package llmtest
