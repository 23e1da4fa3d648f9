// Package action is the ActionService stage: it executes tool calls and lists the tools the
// mesh can run.
//
// Tools plug in through the Tool interface. The service ships built-ins (current_time,
// calculator and, with a memory client, knowledge_search); MCP servers, REST tools and queues
// register further Tool values the same way.
//
// Execute refuses a call before running it when the request is malformed (INVALID_INPUT), the
// tool is unknown (TOOL_NOT_FOUND), the tool needs an approval the request lacks
// (PERMISSION_DENIED) or the arguments do not match the tool's JSON schema
// (INVALID_ARGUMENTS); those are gRPC errors. A tool that ran and failed or timed out is a
// result the model must see, so it is reported in the response with error_code
// EXECUTION_ERROR or EXECUTION_TIMEOUT. Every executed result is cached by (run_id, call_id)
// so a resumed run never executes a call twice.
package action
