// Package generation implements agentmesh.generation.v1.GenerationService, the only stage
// that talks to LLM providers.
//
// A Provider makes the calls: NewOpenAI speaks the OpenAI chat completions API (OpenAI,
// Ollama, vLLM, llama.cpp server, LM Studio, OpenRouter), NewAnthropic the Anthropic Messages
// API, both over go-retryablehttp with JSON and server-sent events, and NewRules is a
// deterministic built-in model with no network. ProvidersFromConfig builds them from the
// configuration, with the sampling configured per provider and per model (WithSampling;
// the request's own sampling fields win). The protocol adapter turns every answer into the
// canonical GenerateResponse (message, tool call or done), parsing tool-call arguments with
// the jsonrepair pipeline (native parse, then repair) unless strict mode is set. Streams
// forward text, reasoning and tool-call fragments (Delta.tool_call: id and name first, then
// argument text) as they arrive; the final answer carries the complete, repaired calls, except
// that the last call of an answer cut off at the output token limit is rejected when its
// arguments are unfinished. Provider state the next turn needs (Anthropic's signed thinking
// blocks) travels as reasoning_state: the caller copies it into the assistant message. An
// answer reports the model the provider says it answered with, and its cost_usd at the
// configured price of that model (Prices, PricesFromConfig). Failures are stage errors with
// an error class (AUTH, QUOTA, RATE_LIMITED with the Retry-After, TIMEOUT, NETWORK, SERVER,
// BAD_RESPONSE, INVALID_REQUEST for a request the provider refuses); an answer cut off before
// any content is MAX_TOKENS_EXCEEDED. Such a failure, and that of an answer that broke off
// after part of it arrived (a stream lost or ended by an error, finish_reason "error"), carries
// the billed tokens and cost as its accounting. Nothing is retried here: the orchestrator's
// accounted attempts are the retries, and no redirect is followed: it would carry the
// request's headers, the API key among them, to the host it names. Answers can be served
// from a bounded LRU cache, kept per user, and every provider call is a "chat {model}" client
// span with the OpenTelemetry GenAI attributes.
package generation
