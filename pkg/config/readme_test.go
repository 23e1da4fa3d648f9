package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/config"
)

// readmeYAML returns the README's ```yaml blocks, each with the line it starts on.
func readmeYAML(t *testing.T) (blocks []string, lines []int) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rest, line := string(readme), 1
	for {
		before, after, ok := strings.Cut(rest, "```yaml\n")
		if !ok {
			return blocks, lines
		}
		line += strings.Count(before, "\n") + 1
		block, tail, _ := strings.Cut(after, "```")
		blocks, lines = append(blocks, block), append(lines, line)
		line += strings.Count(block, "\n")
		rest = tail
	}
}

// TestREADMEExample keeps the README's configuration example loadable and valid.
func TestREADMEExample(t *testing.T) {
	blocks, _ := readmeYAML(t)
	if len(blocks) == 0 {
		t.Fatal("README.md has no yaml example")
	}
	path := filepath.Join(t.TempDir(), "agentmesh.yaml")
	if err := os.WriteFile(path, []byte(blocks[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test")
	cfg, err := config.LoadLayers([]config.Layer{{Name: "readme", Path: path, Required: true}})
	if err != nil {
		t.Fatalf("the README's example does not load: %v", err)
	}
	if len(cfg.Targets) != 2 || cfg.Providers["claude"].Type != "anthropic" || cfg.MCPServers["fs"].Queue != "files" ||
		cfg.RestTools["weather"].URL != "https://api.example.com/weather?q=${parameters.city}" || cfg.Memory.Store != "sqlite" {
		t.Errorf("the example loaded as %+v", cfg)
	}
}

// TestREADMEConfigurationSnippets keeps every agentmesh.yaml snippet of the README loadable:
// each one, as the highest layer over the Configuration example (whose providers the later
// snippets name), loads and validates as a user who copies it would load it. A block whose
// first line is a comment is a fragment of another file (docker-compose.yml, a Prometheus
// configuration) and is not loaded.
func TestREADMEConfigurationSnippets(t *testing.T) {
	blocks, lines := readmeYAML(t)
	dir := t.TempDir()
	base := filepath.Join(dir, "base.yaml")
	if err := os.WriteFile(base, []byte(blocks[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test")
	loaded := 0
	for i, block := range blocks[1:] {
		if strings.HasPrefix(block, "#") {
			continue
		}
		loaded++
		path := filepath.Join(dir, "snippet.yaml")
		if err := os.WriteFile(path, []byte(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := config.LoadLayers([]config.Layer{{Name: "snippet", Path: path, Required: true}, {Name: "example", Path: base, Required: true}}); err != nil {
			t.Errorf("README.md:%d: the yaml block does not load: %v", lines[i+1], err)
		}
	}
	if loaded < 5 {
		t.Errorf("loaded %d configuration snippets of the README, want its 5 at least", loaded)
	}
}
