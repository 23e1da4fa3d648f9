package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/config"
)

// TestREADMEExample keeps the README's configuration example loadable and valid.
func TestREADMEExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```yaml\n")
	if !ok {
		t.Fatal("README.md has no yaml example")
	}
	example, _, _ := strings.Cut(rest, "```")
	path := filepath.Join(t.TempDir(), "agentmesh.yaml")
	if err := os.WriteFile(path, []byte(example), 0o600); err != nil {
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
