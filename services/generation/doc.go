// Package generation implements agentmesh.generation.v1.GenerationService, the only stage
// that talks to LLM providers.
//
// A Provider makes the calls: NewOpenAI speaks the OpenAI chat completions API (OpenAI,
// Ollama, vLLM, llama.cpp server, LM Studio, OpenRouter) over go-retryablehttp, and NewRules
// is a deterministic built-in model with no network. The protocol adapter turns every answer
// into the canonical GenerateResponse (message, tool call or done), parsing tool-call
// arguments and repairing malformed ones unless strict mode is set. Failures are stage errors
// with an error class (AUTH, QUOTA, RATE_LIMITED, TIMEOUT, NETWORK, SERVER, BAD_RESPONSE).
// Non-streamed answers can be served from a bounded LRU cache, and every provider call is a
// "chat {model}" client span with the OpenTelemetry GenAI attributes.
package generation
