package generation_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	"github.com/agentmesh/agentmesh/services/generation"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

var update = flag.Bool("update", false, "rewrite the request.json and result.json goldens from the current output")

// goldenAPIs are the wire formats under testdata/wire, with their endpoint and provider.
var goldenAPIs = map[string]struct {
	path     string
	provider func(t *testing.T, url string) generation.Provider
}{
	"openai": {"/v1/chat/completions", func(t *testing.T, url string) generation.Provider { return openAIAt(t, url, nil) }},
	"anthropic": {"/v1/messages", func(t *testing.T, url string) generation.Provider {
		return anthropicAt(t, url, func(o *generation.AnthropicOptions) { o.Name = "anthropic" })
	}},
}

// TestWireGoldens replays the providers' real wire formats. Each directory
// testdata/wire/API/CASE holds input.json (the GenerateRequest, protojson), request.json (the
// exact body the provider must send, compared as JSON), response.json or response.sse (the
// API's answer, served with its content type by an httptest server) and result.json (the
// canonical outcome: the stream's deltas and the final answer, latency left out). Answers in
// response.sse are requested with GenerateStream, the others with Generate. Run with -update
// to rewrite request.json and result.json.
func TestWireGoldens(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "wire", "*", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden cases (%v)", err)
	}
	for _, dir := range dirs {
		api := filepath.Base(filepath.Dir(dir))
		t.Run(api+"/"+filepath.Base(dir), func(t *testing.T) {
			spec, ok := goldenAPIs[api]
			if !ok {
				t.Fatalf("unknown API directory %q", api)
			}
			runGolden(t, dir, api, spec.path, spec.provider)
		})
	}
}

// runGolden runs one golden case.
func runGolden(t *testing.T, dir, api, path string, provider func(*testing.T, string) generation.Provider) {
	input := &generationv1.GenerateRequest{}
	if err := protojson.Unmarshal(readFile(t, dir, "input.json"), input); err != nil {
		t.Fatalf("input.json: %v", err)
	}
	answer, contentType, stream := readFile(t, dir, "response.json"), "application/json", false
	if answer == nil {
		answer, contentType, stream = readFile(t, dir, "response.sse"), "text/event-stream", true
	}
	if answer == nil {
		t.Fatal("no response.json or response.sse")
	}

	var mu sync.Mutex
	var sent []byte
	url := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		sent = body
		mu.Unlock()
		if r.URL.Path != path {
			http.Error(w, "unexpected path "+r.URL.Path, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(answer)
	})
	client := serveProviders(t, map[string]generation.Provider{api: provider(t, url)})

	result := map[string]any{}
	if stream {
		deltas, final, err := streamAll(t, client, input)
		if err != nil {
			t.Fatal(err)
		}
		var ds []any
		for _, d := range deltas {
			ds = append(ds, protoValue(t, d))
		}
		result["deltas"] = ds
		result["final"] = finalValue(t, final)
	} else {
		final, err := client.Generate(t.Context(), input)
		if err != nil {
			t.Fatal(err)
		}
		result["final"] = finalValue(t, final)
	}
	mu.Lock()
	defer mu.Unlock()
	compareJSON(t, dir, "request.json", jsonValue(t, sent))
	compareJSON(t, dir, "result.json", result)
}

// finalValue is the final answer as JSON, without its latency.
func finalValue(t *testing.T, resp *generationv1.GenerateResponse) any {
	resp = proto.CloneOf(resp)
	resp.LatencyMs = 0
	return protoValue(t, resp)
}

// protoValue is a message as decoded protojson.
func protoValue(t *testing.T, m proto.Message) any {
	t.Helper()
	data, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return jsonValue(t, data)
}

// jsonValue decodes JSON.
func jsonValue(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return v
}

// compareJSON compares got with the golden file name of dir, or rewrites it with -update.
func compareJSON(t *testing.T, dir, name string, got any) {
	t.Helper()
	gotJSON, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(filepath.Join(dir, name), append(gotJSON, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := readFile(t, dir, name)
	if want == nil {
		t.Fatalf("%s is missing (run go test -update to create it)", name)
	}
	if !reflect.DeepEqual(jsonValue(t, gotJSON), jsonValue(t, want)) {
		t.Errorf("%s differs:\n--- got ---\n%s\n--- want ---\n%s", name, gotJSON, bytes.TrimSpace(want))
	}
}

// readFile reads dir/name; nil when it does not exist.
func readFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return data
}
