// Package xmltransport implements the XML tool transport of the agent contract (XML-NEXT and
// XML-PAST): tool calls and the final report written by the model as tags in its text rather
// than as provider tool calls.
//
// A Session holds the fixed per-run nonce (8 hex digits) and the next unused slot number.
// Numbered slots ("NONCE-0001", "NONCE-0002", ...) continue across turns; "NONCE-FINAL"
// carries the final report and "NONCE-PROGRESS" a progress note (xml mode only). The model
// writes
//
//	<ai-agent-NONCE-0001 tool="get_weather">{"city": "Paris"}</ai-agent-NONCE-0001>
//	<ai-agent-NONCE-FINAL tool="agent__final_report" format="markdown">...</ai-agent-NONCE-FINAL>
//
// Parse finds the tags by substring (no XML parser), ignores tags with another nonce, a used
// or unknown slot, a missing tool attribute or no closing tag, and applies the stop-reason
// rule to an unclosed final-report tag. RenderNext writes the ephemeral per-turn instructions
// (nonce, tools with their schemas, slot templates, progress and final slots; only the final
// slot in a forced-final turn), RenderPast the permanent tool responses, and Stream buffers
// streamed text from an opening-tag fragment to the matching closing tag.
//
// The package holds no state beyond the Session value, which callers persist with the run.
package xmltransport
