package action

import (
	"context"
	"errors"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// BuiltinServer is the server name of tools that run inside the action service.
const BuiltinServer = "builtin"

// ErrTransient marks a tool failure that may succeed when tried again (a network blip, a 5xx).
// Tools wrap it, e.g. fmt.Errorf("%w: upstream returned 503", action.ErrTransient), and the
// service retries the call with exponential backoff within the call's timeout.
var ErrTransient = errors.New("transient tool failure")

// ErrNotSent marks a tool failure that happened before anything reached the tool's backend
// (a connection that could not be made, an MCP server being restarted). Such an attempt is
// not counted in the response's attempts, which count the requests the backend may have
// received.
var ErrNotSent = errors.New("nothing was sent to the tool's backend")

// ErrMayHaveRun marks a transient failure after which the tool's backend may have run the call
// (a gateway answered 502 or 504 to a REST request that is not safe): the call is retried only
// when its tool is idempotent (its definition says so, or Options.Idempotent names it).
var ErrMayHaveRun = errors.New("the tool's backend may have run the call")

// Tool is one executable tool.
type Tool interface {
	// Definition describes the tool: a unique name that model providers take (1 to 64
	// letters, digits, _ and -: toolname.Valid) and none of the orchestrator's own tools'
	// (toolname.Reserved), a description for the model, the JSON schema of its arguments (nil
	// accepts any object), whether it always needs approval, and its server ("" means
	// BuiltinServer). The service reads it at construction, and again when the tools of its
	// MCP servers change (Options.MCP).
	Definition() *typev1.Tool
	// Call runs the tool. The arguments have been validated against the schema. The context
	// is cancelled when the call's timeout fires. An error is reported to the model as the
	// tool's failure; wrap ErrTransient to have the call retried.
	Call(ctx context.Context, call Call) (string, error)
}

// Call is one invocation of a tool.
type Call struct {
	// UserID is the user the call acts for.
	UserID string
	// ApprovedBy is who approved the call (a principal, tenant/user), as the orchestrator's
	// approval grant, verified, signs it: set for a tool that requires approval, "" for others.
	ApprovedBy string
	// RunID is the run the call belongs to.
	RunID string
	// CallID identifies the call within the run.
	CallID string
	// Arguments are the call's arguments, parsed from JSON (numbers are float64).
	Arguments map[string]any
	// Accounting takes the accounting entries of paid requests the tool makes to other
	// services for the run (an embedding), one per request, retries included.
	Accounting *Accounting
}
