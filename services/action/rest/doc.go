// Package rest implements tools that are one templated HTTP request each.
//
// A tool's URL, header values and body may contain ${parameters.NAME} placeholders. They are
// filled when the tool is called, from the call's validated arguments, never when the
// configuration is loaded, and each value is escaped for where it lands:
//
//   - in the URL, the value is percent-encoded so that it stays one path segment or one query
//     value: every byte except the RFC 3986 unreserved characters (A-Z a-z 0-9 - . _ ~) is
//     encoded, a space as %20; in the path, a value that is or holds between slashes a
//     relative segment ("..", ".") is refused, since servers resolve it, decoded, against the
//     path before it, and so is an empty value that leaves its segment empty ("/users//posts",
//     "/users/"), which servers and proxies merge into, or read as, another path; the scheme,
//     host and port are fixed, so a placeholder there is refused when the tool is built;
//   - in a header value, the value is inserted as is; a value containing a line break is an
//     error, so arguments cannot add headers;
//   - in a JSON body (a Content-Type naming json, or, without a Content-Type, a body template
//     starting with { or [), a placeholder inside a JSON string literal, as in
//     {"q": "find ${parameters.q}"}, is replaced by the value's text JSON-escaped without
//     quotes, and a placeholder outside any string, as in {"limit": ${parameters.limit}}, by
//     the value's JSON encoding (a string is quoted, an absent value is null);
//   - in a form body (application/x-www-form-urlencoded) the value is form-encoded;
//   - in any other body the value's text is inserted as is.
//
// The text of a value is the string itself, a number in its shortest decimal form, true or
// false, the compact JSON of an object or array, and the empty string for an absent value.
//
// A call that acts for a known user names it in the X-Agentmesh-User header (UserHeader), so
// that an API serving many users need not trust a user the model put in the arguments; a call
// of a tool that requires approval names who approved it, as the orchestrator's grant signs
// it, in X-Agentmesh-Approver (ApproverHeader). A tool's configuration may set neither.
//
// Redirects are followed (at most 10); one to another origin (scheme, host and port) than the
// URL's is sent without the headers the tool configures, but Content-Type, and without
// X-Agentmesh-User and X-Agentmesh-Approver, since they may hold the credentials of the tool's
// server and who its user is.
//
// A response with a 2xx status is the tool's result, its body as text; any other status is a
// *StatusError carrying the status and an excerpt of the body. Failures worth retrying (a
// connection that could not be made, 429, 502, 503, 504) wrap ErrTransient; a connection that
// could not be made, where nothing reached the server, wraps ErrNotSent too, and a gateway's
// 502 or 504, after which the server may have processed the request, wraps ErrMayHaveRun. A
// StatusError's RetryAfter is the wait its response's Retry-After header asks for.
package rest
