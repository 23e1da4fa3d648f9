package config

import (
	"os"
	"path/filepath"
	"testing"
)

// layerFiles is the content of one layer: its agentmesh.yaml and optional .env.
type layerFiles struct {
	yaml   string
	dotEnv string
}

// layerOrder is the order of test layers, highest priority first.
var layerOrder = []string{"explicit", "project", "user", "system"}

// writeLayers writes each given layer into its own directory under a temporary directory and
// returns all four layers, highest first; layers not given point at missing files.
func writeLayers(t *testing.T, files map[string]layerFiles) []Layer {
	t.Helper()
	root := t.TempDir()
	var layers []Layer
	for _, name := range layerOrder {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		l := Layer{Name: name, Path: filepath.Join(dir, FileName)}
		if f, ok := files[name]; ok {
			writeFile(t, l.Path, f.yaml)
			if f.dotEnv != "" {
				writeFile(t, filepath.Join(dir, ".env"), f.dotEnv)
			}
		}
		layers = append(layers, l)
	}
	return layers
}

// writeFile writes content to path.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// mustLoad loads layers and fails the test on error.
func mustLoad(t *testing.T, layers []Layer) *Config {
	t.Helper()
	cfg, err := LoadLayers(layers)
	if err != nil {
		t.Fatalf("LoadLayers: %v", err)
	}
	return cfg
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }
