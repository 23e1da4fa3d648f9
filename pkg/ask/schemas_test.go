package ask

import (
	"maps"
	"strings"
	"testing"
)

// TestSchemaCompiledOncePerSchema: a stage asks every question of a kind with the same schema
// (the intent stage even builds it anew for each), and Object compiled it for every question.
// It is compiled once per tool and schema: an equal schema in a new map gets the schema compiled
// before, another schema or tool its own, and a schema that does not compile fails each time.
func TestSchemaCompiledOncePerSchema(t *testing.T) {
	doc := func(maxLength int) map[string]any {
		return map[string]any{
			"type":       "object",
			"required":   []any{"goal"},
			"properties": map[string]any{"goal": map[string]any{"type": "string", "maxLength": maxLength}},
		}
	}
	var c schemaCache
	first, err := c.compile("submit", doc(10))
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.compile("submit", maps.Clone(doc(10)))
	if err != nil || again != first {
		t.Errorf("an equal schema in a new map was compiled again (%p, then %p, %v)", first, again, err)
	}
	other, err := c.compile("submit", doc(20))
	if err != nil || other == first {
		t.Errorf("another schema got the schema compiled before (%p, %v)", other, err)
	}
	if err := other.Validate(map[string]any{"goal": strings.Repeat("x", 15)}); err != nil {
		t.Errorf("the second schema refuses what it allows: %v", err)
	}
	tool, err := c.compile("decide", doc(10))
	if err != nil || tool == first {
		t.Errorf("another tool got the schema compiled for the first (%p, %v)", tool, err)
	}
	bad := map[string]any{"type": "object", "properties": map[string]any{"goal": map[string]any{"type": 5}}}
	for i := range 2 {
		if _, err := c.compile("submit", bad); err == nil {
			t.Fatalf("compile %d of a bad schema succeeded", i+1)
		}
	}
}
