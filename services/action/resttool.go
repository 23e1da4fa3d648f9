package action

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/schema"
	"github.com/agentmesh/agentmesh/services/action/rest"
	"google.golang.org/protobuf/types/known/structpb"
)

// RESTServer is the server name of REST tools.
const RESTServer = "rest"

// RESTTool describes a tool implemented by one templated HTTP request (see package rest for
// the placeholder rules).
type RESTTool struct {
	// Name is the tool's name.
	Name string
	// Description tells the model what the tool does.
	Description string
	// Request is the templated request.
	Request rest.Spec
	// InputSchema is the JSON schema of the arguments, whose properties must include every
	// placeholder name; nil means an object whose properties are the placeholder names, each
	// a required string.
	InputSchema map[string]any
	// OutputSchema is the JSON schema of the response body, when the tool promises one; nil
	// means any text.
	OutputSchema map[string]any
	// Queue is the queue the tool runs on; "" means the default queue.
	Queue string
	// RequiresApproval makes every call wait for approval. A tool whose method is not safe
	// (any but GET, HEAD and OPTIONS: it may write, delete or spend) waits for it without
	// this, unless the service's Options.NoApproval names it (DESIGN §10: such tools require
	// approval unless the configuration says otherwise).
	RequiresApproval bool
}

// restTool is a REST tool ready to run.
type restTool struct {
	request *rest.Tool
	def     *typev1.Tool
}

// NewRESTTool parses the tool's templates; its requests are sent with client. An output schema
// that does not compile is an error wrapping exitcode.Schema.
func NewRESTTool(spec RESTTool, client *http.Client) (Tool, error) {
	req, err := rest.New(spec.Request, client)
	if err != nil {
		return nil, fmt.Errorf("REST tool %q: %w", spec.Name, err)
	}
	input := spec.InputSchema
	if input == nil {
		input = rest.DefaultSchema(req.Parameters())
	} else if err := checkPlaceholders(req.Parameters(), input); err != nil {
		return nil, fmt.Errorf("REST tool %q: %w", spec.Name, err)
	}
	s, err := structpb.NewStruct(input)
	if err != nil {
		return nil, fmt.Errorf("REST tool %q: input schema: %w", spec.Name, err)
	}
	def := &typev1.Tool{
		Name:             spec.Name,
		Description:      spec.Description,
		InputSchema:      s,
		RequiresApproval: spec.RequiresApproval || req.Writes(),
		Server:           RESTServer,
		Queue:            spec.Queue,
	}
	if spec.OutputSchema != nil {
		if _, err := schema.Compile("rest:///"+spec.Name+".output.json", spec.OutputSchema); err != nil {
			err = fmt.Errorf("REST tool %q: output schema: %w", spec.Name, err)
			return nil, exitcode.Wrap(exitcode.Schema, err)
		}
		if def.OutputSchema, err = structpb.NewStruct(spec.OutputSchema); err != nil {
			return nil, fmt.Errorf("REST tool %q: output schema: %w", spec.Name, err)
		}
	}
	return &restTool{request: req, def: def}, nil
}

// checkPlaceholders refuses a placeholder that is no property of the tool's input schema: the
// model, which fills the arguments by the schema, is never asked for it, so every request
// would go without its value (an empty path or query value, a JSON null), and a misspelt
// placeholder would go unnoticed.
func checkPlaceholders(params []string, input map[string]any) error {
	props, _ := input["properties"].(map[string]any)
	for _, p := range params {
		if _, ok := props[p]; !ok {
			names := "none"
			if len(props) > 0 {
				names = strings.Join(slices.Sorted(maps.Keys(props)), ", ")
			}
			return fmt.Errorf("placeholder ${parameters.%s} names no property of the input schema (properties: %s)", p, names)
		}
	}
	return nil
}

// Definition describes the tool.
func (t *restTool) Definition() *typev1.Tool { return t.def }

// Call sends the request, naming the call's user, when it has one, in the rest.UserHeader
// header, and who approved it, when it was approved, in rest.ApproverHeader; failures worth
// retrying are transient, a connection that could not be made sent nothing, a gateway's 502 or
// 504 to a request whose method is not safe may have run it, and a response's Retry-After is
// the least wait before the next attempt.
func (t *restTool) Call(ctx context.Context, call Call) (string, error) {
	who := rest.Principals{User: call.UserID, Approver: call.ApprovedBy}
	out, err := t.request.Call(ctx, call.Arguments, who)
	if errors.Is(err, rest.ErrTransient) {
		te := transientError{err: err, unsent: errors.Is(err, rest.ErrNotSent),
			mayHaveRun: errors.Is(err, rest.ErrMayHaveRun) && t.request.Writes()}
		var se *rest.StatusError
		if errors.As(err, &se) {
			te.after = se.RetryAfter
		}
		return "", te
	}
	return out, err
}
