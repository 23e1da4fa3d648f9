package action

import (
	"context"
	"errors"
	"fmt"
	"slices"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/toolname"
	"github.com/agentmesh/agentmesh/services/action/mcp"
	"google.golang.org/protobuf/types/known/structpb"
)

// MCPSeparator joins an MCP server's name and its tool's name into the tool's name in the
// mesh: "<server>__<tool>" (see toolname.MCP).
const MCPSeparator = toolname.MCPSeparator

// MCPBinding is how the tools of one MCP server run.
type MCPBinding struct {
	// Queue is the queue the server's tools run on; "" means the default queue.
	Queue string
	// RequiresApproval lists the server's tools that need approval, by the server's name for
	// them or by their namespaced name.
	RequiresApproval []string
}

// mcpTool is a tool of an MCP server, called through the manager's session with it.
type mcpTool struct {
	manager *mcp.Manager
	tool    mcp.Tool
	def     *typev1.Tool
	// listed: its server's binding requires approval for it (MCPBinding.RequiresApproval),
	// which Options.NoApproval may not contradict (checkNamed).
	listed bool
}

// MCPTools returns the tools of every server of the manager, named "<server>__<tool>" in
// names model providers take (toolname.MCP), with their input schemas and descriptions, bound to
// the queues and approval lists of bindings (by server name). A tool needs approval when its
// binding lists it (by its name on its server, "<server>__<tool>" or its name in the mesh) or
// when its MCP annotations say it is destructive, or not read-only with a name that says it
// changes something; the service's name rules and exemptions apply on top, except that
// Options.NoApproval may not name a tool its binding lists (New refuses it). A binding listing
// a tool its server does not offer is an error, so that a misspelt name cannot leave a tool
// unguarded, and so are two tools of a server that would have one name in the mesh.
func MCPTools(m *mcp.Manager, bindings map[string]MCPBinding) ([]Tool, error) {
	return mcpTools(m, bindings, true)
}

// mcpTools is MCPTools; unless strict, a binding may list a tool its server does not offer (a
// server that removed it while the service runs).
func mcpTools(m *mcp.Manager, bindings map[string]MCPBinding, strict bool) ([]Tool, error) {
	listed := map[string]bool{}    // server and a name a binding may use
	named := map[string]mcp.Tool{} // by name in the mesh
	var tools []Tool
	for _, t := range m.Tools() {
		name := toolname.MCP(t.Server, t.Name)
		switch other, ok := named[name]; {
		case ok && other.Server == t.Server:
			return nil, fmt.Errorf("MCP server %q: tools %q and %q would both be named %q", t.Server, other.Name, t.Name, name)
		case ok:
			return nil, fmt.Errorf("MCP tools %q of server %q and %q of server %q would both be named %q", other.Name, other.Server, t.Name, t.Server, name)
		}
		named[name] = t
		b := bindings[t.Server]
		aliases := []string{t.Name, t.Server + MCPSeparator + t.Name, name}
		for _, alias := range aliases {
			listed[t.Server+"\x00"+alias] = true
		}
		var schema *structpb.Struct
		if t.InputSchema != nil {
			var err error
			if schema, err = structpb.NewStruct(t.InputSchema); err != nil {
				return nil, fmt.Errorf("MCP tool %s: input schema: %w", name, err)
			}
		}
		listedHere := slices.ContainsFunc(aliases, func(a string) bool { return slices.Contains(b.RequiresApproval, a) })
		tools = append(tools, &mcpTool{manager: m, tool: t, listed: listedHere, def: &typev1.Tool{
			Name:             name,
			Description:      t.Description,
			InputSchema:      schema,
			RequiresApproval: listedHere || annotationsRequireApproval(t.Name, t.Annotations),
			Server:           t.Server,
			Queue:            b.Queue,
		}})
	}
	for server, b := range bindings {
		for _, name := range b.RequiresApproval {
			if strict && !listed[server+"\x00"+name] {
				return nil, fmt.Errorf("MCP server %q has no tool %q to require approval for", server, name)
			}
		}
	}
	return tools, nil
}

// Definition describes the tool.
func (t *mcpTool) Definition() *typev1.Tool { return t.def }

// Call calls the tool through tools/call, naming the call's user, when it has one, and who
// approved it, when it was approved, in the request's _meta (mcp.UserMetaKey,
// mcp.ApproverMetaKey). A server being restarted fails the call before anything
// is sent, as a transient failure, so the call is retried; a tool the server no longer offers
// fails it before anything is sent too, for good.
func (t *mcpTool) Call(ctx context.Context, call Call) (string, error) {
	out, err := t.manager.Call(ctx, t.tool.Server, t.tool.Name, call.Arguments,
		mcp.Principals{User: call.UserID, Approver: call.ApprovedBy})
	switch {
	case errors.Is(err, mcp.ErrUnavailable):
		return "", transientError{err: err, unsent: true, after: mcp.RetryAfter(err)}
	case errors.Is(err, mcp.ErrNoTool): // it removed the tool: trying again cannot help
		return "", notSentError{err}
	}
	return out, err
}
