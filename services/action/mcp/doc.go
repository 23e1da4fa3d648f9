// Package mcp connects the action service to MCP servers through the official MCP Go SDK:
// stdio servers run as child processes, remote servers are reached over streamable HTTP.
//
// A call that acts for a known user names it in its tools/call request's _meta, under
// UserMetaKey ("agentmesh.dev/user_id"), so that a server serving many users need not trust a
// user the model put in the arguments; a call of a tool that requires approval names who
// approved it there too, under ApproverMetaKey ("agentmesh.dev/approved_by").
//
// Start connects to every server, lists its tools (tools/list) and keeps each session
// supervised: when a server's session ends (a stdio child exits, a remote server goes away)
// it is restarted with exponential backoff, doubling from Options.RestartBackoff up to
// MaxRestartBackoff, and calls made meanwhile fail at once with an error wrapping
// ErrUnavailable that says why. A server's tools are listed again when it says they changed
// (notifications/tools/list_changed) and when it is restarted; Manager.Generation counts
// those changes. A remote server's URL often carries a credential (a key in its
// path or query), so errors and logs name only its scheme and host; a stdio server's arguments
// may too (a database URL with its password), so they name only its command.
//
// A stdio server's child process gets only the environment its Server gives (plus PATH, taken
// from this process, when that environment has none); the command is looked up in that PATH;
// it runs in Server.Dir. On Linux it runs in its own process group, which is killed once the
// server has exited, on its own or closed (the processes it started and left behind, which
// would otherwise keep its session open), is killed if this process dies (PR_SET_PDEATHSIG)
// and gets the resource limits of Server.Limits with core dumps disabled: they are set with
// prlimit(2) on the child right after it starts, before the MCP handshake, so the child's
// first instructions run under this process's limits. On other systems only the environment
// and working directory are enforced, and asking for limits is an error. The child's stderr is
// logged at debug level, and its last lines are quoted when the server fails to start or exits.
package mcp
