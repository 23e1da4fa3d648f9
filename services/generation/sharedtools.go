package generation

import (
	"encoding/json"
	"strings"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/structjson"
	"github.com/agentmesh/agentmesh/pkg/toolwire"
	lru "github.com/hashicorp/golang-lru/v2"
)

// sharedToolsSize is how many distinct tools sharedTools keeps: far more than the tools of
// one deployment's servers, and few enough that their schemas stay small.
const sharedToolsSize = 1024

// sharedTools keeps one decoded copy of each distinct tool the service is offered. Every
// request carries its tools, the largest part of a short conversation's request once decoded
// (a JSON schema as a google.protobuf.Struct is a map and a Value per node): a request's
// tools are swapped for the shared copies equal to them, so a request that waits on its
// provider holds no tool of its own, and each tool's schema is made into the map the adapter
// reads once instead of with every answer, and into the JSON the providers send once instead
// of with every request. A copy holds what this stage reads of a tool, its
// name, description and input schema, and tools are equal when those are, the schema compared
// as its canonical JSON (structjson, sorted keys: for a small schema 4 us and 8 allocations,
// where a deterministic protobuf encoding, sorting maps by reflection, costs 12 us and 24). It
// is safe for concurrent use; the copies it hands out are read, never modified.
type sharedTools struct {
	cache *lru.Cache[string, *sharedTool]
	// byTool finds the copy of a tool toolwire shared (the gRPC codec decodes each distinct
	// tool once) without rendering its schema as JSON to look it up.
	byTool toolwire.Memo[*sharedTool]
}

// sharedTool is a tool's shared copy and its input schema as the providers send it and as
// the adapter reads it.
type sharedTool struct {
	tool   *typev1.Tool
	json   json.RawMessage // nil for a tool without an input schema, or one without a JSON form
	schema map[string]any  // nil for a tool without an input schema
}

func newSharedTools() *sharedTools {
	cache, err := lru.New[string, *sharedTool](sharedToolsSize)
	if err != nil {
		panic(err) // only for a size that is not positive
	}
	return &sharedTools{cache: cache}
}

// share returns tools with each tool replaced by its shared copy (tools itself is not
// modified), their input schemas as JSON in the same order (for Request.ToolSchemas), and the
// shared copies themselves, whose input schemas the adapter reads. A tool whose schema has no
// JSON form (a NaN) is kept as it is, with no JSON.
func (c *sharedTools) share(tools []*typev1.Tool) ([]*typev1.Tool, []json.RawMessage, toolSet) {
	if len(tools) == 0 {
		return tools, nil, nil
	}
	out := make([]*typev1.Tool, len(tools))
	jsons := make([]json.RawMessage, len(tools))
	set := make(toolSet, len(tools))
	for i, t := range tools {
		st := c.get(t)
		out[i], jsons[i], set[i] = st.tool, st.json, st
	}
	return out, jsons, set
}

// toolSet is a request's tools as their shared copies, in the request's order. A slice, not
// a map by name: a call in progress holds it until the answer is in (issue 15), and a
// request offers few tools.
type toolSet []*sharedTool

// schema returns the input schema of the tool offered as name, as the adapter reads it (the
// last one offered by that name), or nil.
func (ts toolSet) schema(name string) map[string]any {
	for i := len(ts) - 1; i >= 0; i-- {
		if ts[i].tool.GetName() == name {
			return ts[i].schema
		}
	}
	return nil
}

// get returns the shared copy of t, made from t when there is none.
func (c *sharedTools) get(t *typev1.Tool) *sharedTool { return c.byTool.Get(t, c.lookup) }

// lookup returns the shared copy of a tool equal to t, made from t when there is none.
func (c *sharedTools) lookup(t *typev1.Tool) *sharedTool {
	var schema []byte
	if s := t.GetInputSchema(); s != nil {
		var err error
		if schema, err = structjson.Marshal(s); err != nil {
			return newSharedTool(t)
		}
	}
	var key strings.Builder
	key.Grow(len(t.GetName()) + len(t.GetDescription()) + len(schema) + 2)
	key.WriteString(t.GetName())
	key.WriteByte(0)
	key.WriteString(t.GetDescription())
	key.WriteByte(0)
	key.Write(schema)
	if st, ok := c.cache.Get(key.String()); ok {
		return st
	}
	st := newSharedTool(&typev1.Tool{Name: t.GetName(), Description: t.GetDescription(), InputSchema: t.GetInputSchema()})
	st.json = schema
	c.cache.Add(key.String(), st)
	return st
}

func newSharedTool(t *typev1.Tool) *sharedTool {
	st := &sharedTool{tool: t}
	if s := t.GetInputSchema(); s != nil {
		st.schema = s.AsMap()
	}
	return st
}
