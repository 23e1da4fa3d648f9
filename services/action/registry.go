package action

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/schema"
	"github.com/agentmesh/agentmesh/pkg/toolname"
	"github.com/agentmesh/agentmesh/services/action/queue"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// registered is a tool with its resolved definition and compiled argument schema.
type registered struct {
	tool Tool
	// def is the definition as listed: server and queue defaulted, approval flag resolved by
	// policy, idempotent when the tool says so or configuration names it.
	def    *typev1.Tool
	schema *schema.Schema
}

// registry holds the executable tools by name.
type registry struct {
	byName  map[string]*registered
	names   []string // sorted
	version string   // of the list of definitions (listVersion)
	mcpGen  uint64   // the Generation of Options.MCP the registry has the tools of
}

// withGen returns a copy of r marked as having the tools of generation gen.
func (r *registry) withGen(gen uint64) *registry {
	c := *r
	c.mcpGen = gen
	return &c
}

// newRegistry resolves every tool's definition and compiles its schema once; the tools named
// in idempotent are marked so. Nil tools, nameless or duplicate names, names model providers
// refuse (toolname.Valid), names reserved for the orchestrator's own tools
// (toolname.Reserved), queues that do not exist and schemas that do not compile are errors.
func newRegistry(tools []Tool, policy approvalPolicy, idempotent []string, queues *queue.Set) (*registry, error) {
	r := &registry{byName: make(map[string]*registered, len(tools))}
	for i, t := range tools {
		if t == nil || t.Definition() == nil {
			return nil, fmt.Errorf("tool %d has no definition", i)
		}
		def := proto.CloneOf(t.Definition())
		name := def.GetName()
		if name == "" {
			return nil, fmt.Errorf("tool %d has no name", i)
		}
		if !toolname.Valid(name) { // else every request that offers it fails at the provider
			return nil, fmt.Errorf("tool %q: a tool's name is 1 to %d letters, digits, _ and - (model providers refuse other function names)", name, toolname.MaxLen)
		}
		if _, dup := r.byName[name]; dup {
			return nil, fmt.Errorf("duplicate tool name %q", name)
		}
		if toolname.Reserved(name) {
			return nil, fmt.Errorf("tool %q: the name is reserved for one of the orchestrator's own tools (%s)", name, toolname.ReservedNames())
		}
		if def.GetServer() == "" {
			def.Server = BuiltinServer
		}
		if def.GetInputSchema() == nil {
			def.InputSchema = &structpb.Struct{Fields: map[string]*structpb.Value{"type": structpb.NewStringValue("object")}}
		}
		if def.GetQueue() == "" {
			def.Queue = queue.Default
		}
		if !queues.Has(def.GetQueue()) {
			return nil, fmt.Errorf("tool %q: queue %q does not exist (queues: %s)", name, def.GetQueue(), strings.Join(queues.Names(), ", "))
		}
		def.RequiresApproval = policy.requires(name, def.GetRequiresApproval())
		def.Idempotent = def.GetIdempotent() || slices.Contains(idempotent, name)
		schema, err := compileSchema(name, def.GetInputSchema())
		if err != nil {
			return nil, err
		}
		r.byName[name] = &registered{tool: t, def: def, schema: schema}
		r.names = append(r.names, name)
	}
	slices.Sort(r.names)
	version, err := listVersion(r.definitions())
	if err != nil {
		return nil, err
	}
	r.version = version
	return r, nil
}

// listVersion is the version of a list of tools (ListToolsResponse.version): the SHA-256 of
// their deterministic encoding, in order, so that equal lists have one version and a caller
// that holds the list need not be sent it again.
func listVersion(tools []*typev1.Tool) (string, error) {
	h := sha256.New()
	opts := proto.MarshalOptions{Deterministic: true}
	var buf []byte
	for _, t := range tools {
		var err error
		if buf, err = opts.MarshalAppend(buf[:0], t); err != nil {
			return "", fmt.Errorf("tool %q: %w", t.GetName(), err)
		}
		_, _ = h.Write(binary.AppendUvarint(nil, uint64(len(buf))))
		_, _ = h.Write(buf)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// lookup returns the named tool.
func (r *registry) lookup(name string) (*registered, bool) {
	t, ok := r.byName[name]
	return t, ok
}

// definitions returns copies of every tool's definition, sorted by name.
func (r *registry) definitions() []*typev1.Tool {
	defs := make([]*typev1.Tool, 0, len(r.names))
	for _, name := range r.names {
		defs = append(defs, proto.CloneOf(r.byName[name].def))
	}
	return defs
}
