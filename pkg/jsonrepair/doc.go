// Package jsonrepair parses JSON written by language models, with the deterministic two-step
// pipeline of the agent contract: a native parse first, then, only when it fails, a repair of
// the text and a second parse.
//
// The repair is guarded and purely textual. It strips a Markdown code fence, drops prose
// before the first JSON object (or array) and after the first complete value, removes
// comments and trailing commas, turns single-quoted strings into double-quoted ones where the
// closing quote is unambiguous, quotes bare object keys, maps the literals True, False and
// None to true, false and null, escapes raw control characters inside strings, and closes a
// dangling string and any braces and brackets left open. Every fix is reported as one line
// of Result.Steps so callers can log exactly what was changed.
//
// ExpandNested is the separate, opt-in repair of stringified nested JSON: string values that
// hold a JSON object or array where the schema wants one are replaced by the parsed value.
//
//	res, err := jsonrepair.ParseObject("```json\n{city: 'Paris',}\n```")
//	// res.Value = map[string]any{"city": "Paris"}
//	// res.Steps = ["stripped a ``` code fence", "quoted 1 bare keys", ...]
package jsonrepair
