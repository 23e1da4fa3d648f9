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

// TestCompileRefusesAReferenceCycleUnderAValue: a reference cycle reached only through some
// part of a value (a property, an item) compiled, since the few trivial values Compile
// validates never reach it, and then every value with that part was refused with "reference
// cycle" as the caller's fault; one under "not" made every value valid. Compile finds every
// schema that applies itself again to the same value. A schema reused by several properties,
// or twice by allOf, and recursion that descends into the value are no cycle.
func TestCompileRefusesAReferenceCycleUnderAValue(t *testing.T) {
	loop := map[string]any{"loop": map[string]any{"$ref": "#/$defs/loop"}}
	for name, doc := range map[string]map[string]any{
		"under a property":  {"type": "object", "properties": map[string]any{"a": map[string]any{"$ref": "#/$defs/loop"}}, "$defs": loop},
		"a property itself": {"properties": map[string]any{"a": map[string]any{"type": "string", "$ref": "#/properties/a"}}},
		"under items":       {"type": "array", "items": map[string]any{"$ref": "#/$defs/loop"}, "$defs": loop},
		"through allOf of additionalProperties": {"additionalProperties": map[string]any{
			"allOf": []any{map[string]any{"type": "integer"}, map[string]any{"$ref": "#/additionalProperties"}}}},
		"through anyOf and then": {"properties": map[string]any{"a": map[string]any{"$ref": "#/$defs/x"}}, "$defs": map[string]any{
			"x": map[string]any{"anyOf": []any{map[string]any{"if": true, "then": map[string]any{"$ref": "#/$defs/x"}}}}}},
		"under not": {"not": map[string]any{"$ref": "#"}},
	} {
		_, err := schema.Compile("test:///cycle.json", doc)
		if err == nil || !strings.Contains(err.Error(), "reference cycle") || !strings.Contains(err.Error(), "test:///cycle.json#/") {
			t.Errorf("%s: Compile = %v, want an error naming the reference cycle and where it is", name, err)
		}
	}
	str := map[string]any{"s": map[string]any{"type": "string"}}
	for name, doc := range map[string]map[string]any{
		"a shared $def":   {"properties": map[string]any{"a": map[string]any{"$ref": "#/$defs/s"}, "b": map[string]any{"$ref": "#/$defs/s"}}, "$defs": str},
		"allOf twice":     {"allOf": []any{map[string]any{"$ref": "#/$defs/s"}, map[string]any{"$ref": "#/$defs/s"}}, "$defs": str},
		"a linked list":   {"$ref": "#/$defs/node", "$defs": map[string]any{"node": map[string]any{"type": "object", "properties": map[string]any{"next": map[string]any{"$ref": "#/$defs/node"}}}}},
		"a tree of items": {"type": "array", "items": map[string]any{"anyOf": []any{map[string]any{"type": "string"}, map[string]any{"$ref": "#"}}}},
		"a tree through allOf": {"allOf": []any{map[string]any{"properties": map[string]any{
			"children": map[string]any{"type": "array", "items": map[string]any{"$ref": "#"}}}}}},
	} {
		if _, err := schema.Compile("test:///fine.json", doc); err != nil {
			t.Errorf("%s: Compile = %v, want no error", name, err)
		}
	}
}
