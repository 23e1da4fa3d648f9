// Package action is the ActionService stage: it executes tool calls and lists the tools the
// mesh can run.
//
// Tools plug in through the Tool interface. The service ships built-ins (current_time,
// calculator and, with a memory client, knowledge_search); MCPTools turns the tools of MCP
// servers (package mcp: stdio children and streamable HTTP servers) into Tool values named
// "<server>__<tool>", and NewRESTTool makes a tool of one templated HTTP request (package
// rest). OptionsFromConfig builds all of them from the configuration.
//
// No call runs twice. Every call is recorded in a Ledger by (run_id, call_id): as started once
// it holds its queue slot, right before its tool runs, and as done with its response after.
// Replicas of the stage share a KVLedger (JetStream key-value), so any replica and any
// resumed orchestrator sees what ran; without NATS the ledger lives in the process's memory.
// Execute first reads the call's record. A done call answers with its recorded response,
// marked cached, before any other check. A started call may still be running on another
// replica until its timeout has passed, and is awaited; after that its execution died: an
// idempotent tool (the built-ins that only read, and tools configuration names) runs again,
// any other is answered as interrupted (status error, error_code EXECUTION_ERROR, error
// "interrupted by a restart; it may or may not have run"), never run a second time. When the
// ledger cannot be read or written, Execute runs nothing and fails with the stage code UNAVAILABLE
// (gRPC UNAVAILABLE), which the caller retries; while a KVLedger's NATS connection is down, the
// service's health is NOT_SERVING (Service.Serving).
//
// Execute refuses a new call before running it when the request is malformed
// (INVALID_INPUT), the tool is unknown (TOOL_NOT_FOUND), the tool needs an approval the
// request lacks (PERMISSION_DENIED) or the arguments do not match the tool's JSON schema
// (INVALID_ARGUMENTS); those are gRPC errors. An admitted call then waits for a slot on its
// tool's named queue (package queue), which bounds how many calls of the queue run at once;
// the wait counts toward the call's timeout, and a request cancelled while waiting runs and
// records nothing. A tool that ran and failed or timed out is a result the model must see, so
// it is reported in the response with error_code EXECUTION_ERROR or EXECUTION_TIMEOUT, and
// recorded like a success.
//
// A failure that wraps ErrTransient (a REST 429, 502, 503 or 504, a refused connection, an MCP
// server being restarted, a remote one that cannot be reached, lost the session or answered a call 429 or 503) is retried up to 3 times with backoff within the call's timeout,
// unless it also wraps ErrMayHaveRun (a REST 502 or 504 of a method that is not safe: the
// gateway may have passed the request on) and the tool is not idempotent, so that a tool is
// never run twice when it may have run. A REST response's Retry-After is waited for before
// the next attempt, which is not made when that wait does not fit the call's timeout. The
// response's attempts count the requests that may have reached the tool's backend: attempts
// that wrap ErrNotSent (nothing was sent) are not counted. The response also carries the
// accounting entries of paid requests the tool made for the run (Call.Accounting:
// knowledge_search's query embeddings), which the orchestrator adds to the run's accounting.
//
// A tool needs approval when configuration says so, when its name has a word that writes,
// deletes, runs commands or spends money, or when its MCP annotations say it is destructive,
// or not read-only with a name that says it changes something; configured exemptions win.
package action
