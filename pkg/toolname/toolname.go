// Package toolname holds the rules of tool names that more than one part of the mesh applies:
// the names model providers take (Valid), the names the orchestrator reserves for its own
// tools, which no tool of the action stage may have, the name in the mesh of an MCP server's
// tool, and the names of a list of tools.
package toolname

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// MCPSeparator joins an MCP server's name and its tool's name into the tool's name in the
// mesh: "<server>__<tool>" (see MCP).
const MCPSeparator = "__"

// MaxLen is the longest tool name model providers take: OpenAI and Anthropic refuse a request
// offering a function whose name is not 1 to 64 letters, digits, _ and -.
const MaxLen = 64

// MaxRequestBytes is the longest tool name a request to a stage may carry (planning's steps,
// observation's tool_name, recovery's alternative tools, intent's available_tools; the action
// stage bounds a call's tool name and id alike, at the same 512): a name any caller may send,
// not only one the mesh made (MaxLen), bounded so that the logs, errors and reasons that quote
// it stay small.
const MaxRequestBytes = 512

// MaxRequestTools is the most tools a request to a stage may offer by name (the planning
// stage's and the intent stage's available_tools): far more than a model provider takes in one
// request (OpenAI 128), and the stages' rules match the message or each clause of the goal
// against every tool.
const MaxRequestTools = 1000

// Valid reports whether name is a name model providers take for a function: 1 to MaxLen
// letters, digits, _ and -.
func Valid(name string) bool {
	return name != "" && len(name) <= MaxLen && !strings.ContainsFunc(name, func(r rune) bool { return !allowed(r) })
}

// allowed reports whether model providers take r in a function's name.
func allowed(r rune) bool {
	return r == '_' || r == '-' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
}

// MCP returns the name in the mesh of a server's tool: "<server>__<tool>", with every
// character model providers refuse in a function name ('.', which the MCP specification allows
// in tool names, '/', any other) replaced by '_', and, when longer than MaxLen, cut to it,
// ending in '_' and 8 hex digits of the SHA-256 of the whole name, so that it stays distinct.
func MCP(server, tool string) string {
	full := server + MCPSeparator + tool
	name := strings.Map(func(r rune) rune {
		if allowed(r) {
			return r
		}
		return '_'
	}, full)
	if len(name) > MaxLen {
		sum := sha256.Sum256([]byte(full))
		suffix := "_" + hex.EncodeToString(sum[:4])
		name = name[:MaxLen-len(suffix)] + suffix
	}
	return name
}

// The orchestrator's own tools, which it offers the model and handles itself: they are never
// sent to the action stage.
const (
	// FinalReport is the tool the model gives its final answer with (native tool transport).
	FinalReport = "final_report"
	// XMLFinalReport is the tool of the XML transport's final-report slot.
	XMLFinalReport = "agent__final_report"
	// XMLProgressReport is the tool of the XML transport's progress slot.
	XMLProgressReport = "agent__progress_report"
)

// reserved are the orchestrator's own tools' names.
var reserved = []string{FinalReport, XMLFinalReport, XMLProgressReport}

// Reserved reports whether name is the name of one of the orchestrator's own tools. A tool of
// the action stage of that name would be offered to the model beside the orchestrator's (a
// provider refuses a request offering two tools of one name) or never run, since the
// orchestrator takes a call of that name as its own.
func Reserved(name string) bool { return slices.Contains(reserved, name) }

// ReservedNames lists the reserved names, for an error message: "final_report,
// agent__final_report, agent__progress_report".
func ReservedNames() string { return strings.Join(reserved, ", ") }

// Of returns the names of tools, in order.
func Of(tools []*typev1.Tool) []string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.GetName()
	}
	return names
}
