package jsonrepair_test

import (
	"cmp"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/jsonrepair"
)

var update = flag.Bool("update", false, "rewrite the expected golden files from the current output")

// golden is the expected outcome of Parse for one input file.
type golden struct {
	// Value is the decoded value (absent on failure).
	Value any `json:"value,omitempty"`
	// Repaired is the JSON text that was decoded, when it differs from the input.
	Repaired string `json:"repaired,omitempty"`
	// Steps are the repair steps, in order.
	Steps []string `json:"steps,omitempty"`
	// Error is the error message on failure.
	Error string `json:"error,omitempty"`
}

// TestGolden parses every testdata/NAME.input.txt and compares the outcome with
// testdata/NAME.expected.json. Run with -update to rewrite the expected files.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.input.txt"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs (%v)", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".input.txt")
		t.Run(name, func(t *testing.T) {
			text, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got := outcome(string(text))
			path := filepath.Join("testdata", name+".expected.json")
			if *update {
				data, err := json.MarshalIndent(got, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			var want golden
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if !reflect.DeepEqual(normalise(got), want) {
				gotJSON, _ := json.MarshalIndent(got, "", "  ")
				t.Errorf("Parse(%q) =\n%s\nwant\n%s", text, gotJSON, data)
			}
			if got.Error == "" && !json.Valid([]byte(cmp.Or(got.Repaired, string(text)))) {
				t.Errorf("decoded text %q is not valid JSON", got.Repaired)
			}
		})
	}
}

// outcome runs Parse and describes the result.
func outcome(text string) golden {
	res, err := jsonrepair.Parse(text)
	if err != nil {
		return golden{Error: err.Error()}
	}
	g := golden{Value: res.Value, Steps: res.Steps}
	if res.Text != text {
		g.Repaired = res.Text
	}
	return g
}

// normalise round-trips a golden through JSON so it compares with a decoded file.
func normalise(g golden) golden {
	data, _ := json.Marshal(g)
	var out golden
	_ = json.Unmarshal(data, &out)
	return out
}
