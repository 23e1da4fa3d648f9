package schema_test

import (
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/schema"
)

// TestCompileRefusesAReferenceCycle: a schema whose $ref resolves to itself before it reads
// a value compiled, and then refused every value with the library's "reference cycle", which
// callers reported as the value's fault; it is now an error of the schema. A recursive schema
// that descends into the value (a tree) is no cycle.
func TestCompileRefusesAReferenceCycle(t *testing.T) {
	for name, doc := range map[string]map[string]any{
		"itself":         {"$ref": "#"},
		"through a $def": {"$defs": map[string]any{"a": map[string]any{"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
		"two $defs":      {"$defs": map[string]any{"a": map[string]any{"$ref": "#/$defs/b"}, "b": map[string]any{"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
	} {
		if _, err := schema.Compile("test:///cycle.json", doc); err == nil || !strings.Contains(err.Error(), "reference cycle") {
			t.Errorf("%s: Compile = %v, want an error naming the reference cycle", name, err)
		}
	}
	tree := map[string]any{"type": "object", "properties": map[string]any{
		"children": map[string]any{"type": "array", "items": map[string]any{"$ref": "#"}}}}
	sch, err := schema.Compile("test:///tree.json", tree)
	if err != nil {
		t.Fatalf("a recursive tree schema: %v", err)
	}
	if err := sch.Validate(map[string]any{"children": []any{map[string]any{"children": []any{}}}}); err != nil {
		t.Errorf("a tree: %v", err)
	}
}
