package config

import (
	"errors"
	"io/fs"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestDefaultsWithoutFiles(t *testing.T) {
	cfg := mustLoad(t, writeLayers(t, nil))
	if !reflect.DeepEqual(cfg, Default()) {
		t.Errorf("config without files = %+v, want Default() %+v", cfg, Default())
	}
	d := cfg.Defaults
	checks := []struct {
		name      string
		got, want any
	}{
		{"services.orchestrator", cfg.Services.Orchestrator, "127.0.0.1:7000"},
		{"services.recovery", cfg.Services.Recovery, "127.0.0.1:7008"},
		{"max_turns", d.MaxTurns, int32(10)},
		{"max_retries", d.MaxRetries, int32(3)},
		{"tool_response_max_bytes", d.ToolResponseMaxBytes, int64(12288)},
		{"context_window", d.ContextWindow, int64(131072)},
		{"approval_timeout_ms", d.ApprovalTimeoutMS, int64(300000)},
		{"answer_timeout_ms", d.AnswerTimeoutMS, int64(300000)},
		{"observation.max_input_bytes", cfg.Observation.MaxInputBytes, int64(0)},
		{"tool_transport", d.ToolTransport, "native"},
		{"cache_responses", d.CacheResponses, false},
		{"rules provider", cfg.Providers["rules"].Type, "rules"},
		{"targets", cfg.Targets, []Target{{Provider: "rules", Model: "rules-v1"}}},
		{"default queue", cfg.Queues[DefaultQueue].Concurrent, 8},
		{"memory store", cfg.Memory.Store, "memory"},
		{"memory quota", cfg.Memory.QuotaPerUser, 10000},
		{"memory postgres connections", cfg.Memory.PostgresMaxConns, 16},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if err := Default().Validate(); err != nil {
		t.Errorf("Default().Validate() = %v", err)
	}
}

func TestLayerPrecedence(t *testing.T) {
	files := map[string]layerFiles{
		"explicit": {yaml: "services:\n  intent: explicit:1\n"},
		"project":  {yaml: "services:\n  intent: project:1\n  planning: project:2\n"},
		"user":     {yaml: "services:\n  intent: user:1\n  planning: user:2\n  context: user:3\n"},
		"system":   {yaml: "services:\n  intent: system:1\n  planning: system:2\n  context: system:3\n  generation: system:4\n"},
	}
	tests := []struct {
		name   string
		layers []string
		want   Services
	}{
		{"all four", []string{"explicit", "project", "user", "system"},
			Services{Intent: "explicit:1", Planning: "project:2", Context: "user:3", Generation: "system:4"}},
		{"no explicit", []string{"project", "user", "system"},
			Services{Intent: "project:1", Planning: "project:2", Context: "user:3", Generation: "system:4"}},
		{"home and etc", []string{"user", "system"},
			Services{Intent: "user:1", Planning: "user:2", Context: "user:3", Generation: "system:4"}},
		{"etc only", []string{"system"},
			Services{Intent: "system:1", Planning: "system:2", Context: "system:3", Generation: "system:4"}},
		{"explicit only", []string{"explicit"},
			Services{Intent: "explicit:1", Planning: "127.0.0.1:7002", Context: "127.0.0.1:7003", Generation: "127.0.0.1:7004"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			present := map[string]layerFiles{}
			for _, name := range tt.layers {
				present[name] = files[name]
			}
			s := mustLoad(t, writeLayers(t, present)).Services
			got := Services{Intent: s.Intent, Planning: s.Planning, Context: s.Context, Generation: s.Generation}
			if got != tt.want {
				t.Errorf("services = %+v, want %+v", got, tt.want)
			}
			if s.Action != "127.0.0.1:7005" {
				t.Errorf("services.action = %q, want the default", s.Action)
			}
		})
	}
}

func TestDeepMergeAcrossLayers(t *testing.T) {
	layers := writeLayers(t, map[string]layerFiles{
		"system": {yaml: `
providers:
  local:
    type: openai
    base_url: http://localhost:8080/v1
    api_key: system-key
    models:
      m1: {context_window: 100000}
mcp_servers:
  fs: {command: npx, args: [a, b], env: {A: "1"}}
`},
		"user": {yaml: `
providers:
  local:
    temperature: 0.2
    models:
      m2: {context_window: 200000}
queues:
`},
		"project": {yaml: `
providers:
  local:
    api_key: project-key
  other: {type: anthropic, base_url: https://api.anthropic.com/v1}
mcp_servers:
  fs: {args: [c], env: {B: "2"}}
`},
		"explicit": {yaml: `
targets:
  - {provider: local, model: m1}
  - {provider: other, model: claude}
`},
	})
	cfg := mustLoad(t, layers)
	local := cfg.Providers["local"]
	want := Provider{
		Type: "openai", BaseURL: "http://localhost:8080/v1", APIKey: "project-key", Temperature: ptr(0.2),
		Models: map[string]Model{"m1": {ContextWindow: 100000}, "m2": {ContextWindow: 200000}},
	}
	if !reflect.DeepEqual(local, want) {
		t.Errorf("providers.local = %+v, want %+v", local, want)
	}
	if got := slices.Sorted(maps.Keys(cfg.Providers)); !slices.Equal(got, []string{"local", "other", "rules"}) {
		t.Errorf("providers = %v, want local, other and rules", got)
	}
	fs := cfg.MCPServers["fs"]
	if fs.Command != "npx" || !slices.Equal(fs.Args, []string{"c"}) || !reflect.DeepEqual(fs.Env, map[string]string{"A": "1", "B": "2"}) {
		t.Errorf("mcp_servers.fs = %+v, want command npx, args replaced by [c], env merged", fs)
	}
	if want := []Target{{"local", "m1"}, {"other", "claude"}}; !slices.Equal(cfg.Targets, want) {
		t.Errorf("targets = %v, want %v", cfg.Targets, want)
	}
	if q := cfg.Queues[DefaultQueue]; q.Concurrent != 8 {
		t.Errorf("an empty queues: in a layer changed the default queue to %+v", q)
	}
}

func TestAnchorsAndMergeKeys(t *testing.T) {
	layers := writeLayers(t, map[string]layerFiles{"project": {yaml: `
x-model: &model {context_window: 4000, max_output_tokens: 500}
providers:
  local:
    type: openai
    models:
      a: *model
      b:
        <<: *model
        max_output_tokens: 100
`}})
	_, err := LoadLayers(layers)
	if err == nil || !strings.Contains(err.Error(), `unknown key "x-model"`) {
		t.Fatalf("LoadLayers = %v, want unknown key x-model", err)
	}

	layers = writeLayers(t, map[string]layerFiles{"project": {yaml: `
providers:
  local:
    type: openai
    models:
      a: &model {context_window: 4000, max_output_tokens: 500}
      b:
        <<: *model
        max_output_tokens: 100
`}})
	models := mustLoad(t, layers).Providers["local"].Models
	if a := models["a"]; a.ContextWindow != 4000 || a.MaxOutputTokens != 500 {
		t.Errorf("models.a = %+v, want the anchor's values", a)
	}
	if b := models["b"]; b.ContextWindow != 4000 || b.MaxOutputTokens != 100 {
		t.Errorf("models.b = %+v, want context_window merged and max_output_tokens overridden", b)
	}
}

func TestProviderBaseURLDefaults(t *testing.T) {
	layers := writeLayers(t, map[string]layerFiles{"project": {yaml: "providers:\n  oa: {type: openai}\n  an: {type: anthropic}\n  own: {type: openai, base_url: \"http://127.0.0.1:8080/v1\"}\n"}})
	cfg := mustLoad(t, layers)
	for name, want := range map[string]string{"oa": DefaultOpenAIBaseURL, "an": DefaultAnthropicBaseURL, "own": "http://127.0.0.1:8080/v1"} {
		if got := cfg.Providers[name].BaseURL; got != want {
			t.Errorf("%s base_url = %q, want %q", name, got, want)
		}
	}
}

func TestLayerErrors(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		env   string
		wants []string
	}{
		{"unknown top-level key", "provders: {}\n", "", []string{`line 1: unknown key "provders"`, "known keys:"}},
		{"unknown nested key", "providers:\n  local:\n    type: openai\n    bse_url: http://x\n", "",
			[]string{`line 4: unknown key "bse_url" in providers.local`}},
		{"unknown key in a list item", "targets:\n  - {provider: rules, modle: x}\n", "",
			[]string{`unknown key "modle" in targets[0]`}},
		{"malformed yaml", "services:\n  intent: [a\n", "", []string{"line "}},
		{"wrong type", "defaults:\n  max_turns: lots\n", "", []string{"line 2", "lots"}},
		// yaml.v3 named the Go type and the line, not the key: "cannot unmarshal !!str
		// `maybe` into bool", of a flow mapping's one line.
		{"text for a boolean", "durability: {checkpoints: maybe, lease_ttl_ms: 5000}\n", "",
			[]string{"line 1: durability.checkpoints is maybe, which is not true or false"}},
		{"text for a whole number", "defaults: {max_turns: ten, max_retries: 2}\n", "",
			[]string{"line 1: defaults.max_turns is ten, which is not a whole number from " +
				"-2147483648 to 2147483647"}},
		{"whole number out of range", "defaults: {max_turns: 3000000000}\n", "",
			[]string{"line 1: defaults.max_turns is 3000000000, which is not a whole number from " +
				"-2147483648 to 2147483647"}},
		{"text for a number", "defaults: {force_synthesis_at_ratio: half}\n", "",
			[]string{"line 1: defaults.force_synthesis_at_ratio is half, which is not a number"}},
		{"text from a variable", "defaults:\n  max_turns: ${TURNS}\n", "TURNS=ten\n",
			[]string{"line 2: defaults.max_turns is ten, which is not a whole number"}},
		{"mapping for a list", "targets: {provider: rules, model: rules-v1}\n", "",
			[]string{"line 1: targets must be a list"}},
		{"list for a mapping", "auth:\n  api_keys:\n    - [sha256:x, alice]\n", "",
			[]string{"line 3: auth.api_keys[0] must be a mapping"}},
		{"mapping for a text", "nats: {url: {host: x}}\n", "",
			[]string{"line 1: nats.url must be a text"}},
		// yaml.v3 truncates a fraction into an integer: these loaded as 2, 1 and 3.
		{"fraction for a whole number", "defaults:\n  max_turns: 2.9\n", "", []string{"line 2: defaults.max_turns is 2.9, which is not a whole number"}},
		{"fraction in a list item", "queues:\n  default: {concurrent: 3.7}\n", "", []string{"queues.default.concurrent is 3.7, which is not a whole number"}},
		{"infinity for a whole number", "nats:\n  replicas: .inf\n", "", []string{"nats.replicas is .inf, which is not a whole number"}},
		// A fraction that a ${VAR} brings in was not checked, and loaded as 2.
		{"fraction from a variable", "defaults:\n  max_turns: ${TURNS}\n", "TURNS=2.9\n", []string{"line 2: defaults.max_turns is 2.9, which is not a whole number"}},
		// yaml.v3 said only "invalid array: want 2 elements but got 3", naming neither key nor line.
		{"pair of three", "defaults:\n  cycle_forbid: [[search, fetch, search]]\n", "",
			[]string{"line 2: defaults.cycle_forbid[0] has 3 items, want 2"}},
		{"not a mapping", "- a\n- b\n", "", []string{"must be a mapping"}},
		{"bad variable name", "nats:\n  url: ${1X}\n", "", []string{`nats.url: invalid variable reference "${1X}"`}},
		{"unterminated variable", "nats:\n  url: ${X\n", "", []string{"nats.url: unterminated ${"}},
		{"bad .env line", "nats:\n  url: x\n", "JUST_A_WORD\n", []string{".env line 1: expected KEY=VALUE"}},
		{"text after a double-quoted .env value", "nats:\n  url: x\n", "A=1\nB=\"v\" trailing\n",
			[]string{`.env line 2: variable B: after the closing quote only a # comment may follow, ` +
				`got "trailing"`}},
		{"text after a single-quoted .env value", "nats:\n  url: x\n", "B='v'x # c\n",
			[]string{`.env line 1: variable B: after the closing quote only a # comment may follow, ` +
				`got "x # c"`}},
		{"unterminated double-quoted .env value", "nats:\n  url: x\n", "B=\"v # c\n",
			[]string{".env line 1: variable B: unterminated double-quoted value"}},
		{"unterminated single-quoted .env value", "nats:\n  url: x\n", "B='v # c\n",
			[]string{".env line 1: variable B: unterminated single-quoted value"}},
		{"bad escape in a .env value", "nats:\n  url: x\n", "B=\"\\q\"\n",
			[]string{".env line 1: variable B: malformed double-quoted value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			layers := writeLayers(t, map[string]layerFiles{"user": {yaml: tt.yaml, dotEnv: tt.env}})
			_, err := LoadLayers(layers)
			if err == nil {
				t.Fatal("LoadLayers succeeded, want an error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			wants := append([]string{`config layer "user" (` + layers[2].Path + ")"}, tt.wants...)
			for _, want := range wants {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestMissingExplicitFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	layers := []Layer{{Name: "explicit", Path: missing, Required: true}}
	_, err := LoadLayers(layers)
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("LoadLayers = %v, want ErrInvalid and fs.ErrNotExist", err)
	}
	if !strings.Contains(err.Error(), `config layer "explicit" (`+missing+")") {
		t.Errorf("error %q does not name the explicit layer", err)
	}
}

func TestLoadUsesTheStandardLayers(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	cwd := t.TempDir()
	t.Chdir(cwd)

	layers := Layers("custom.yaml")
	want := []Layer{
		{Name: "explicit", Path: "custom.yaml", Required: true},
		{Name: "project", Path: "./agentmesh.yaml"},
		{Name: "user", Path: filepath.Join(home, ".config", "agentmesh", "agentmesh.yaml")},
		{Name: "system", Path: "/etc/agentmesh/agentmesh.yaml"},
	}
	if !slices.Equal(layers, want) {
		t.Errorf("Layers = %+v, want %+v", layers, want)
	}
	if got := Layers(""); got[0].Name != "project" {
		t.Errorf("Layers(\"\") starts with %+v, want the project layer", got[0])
	}

	writeFile(t, filepath.Join(cwd, "custom.yaml"), "services:\n  intent: explicit:1\n")
	writeFile(t, filepath.Join(cwd, "agentmesh.yaml"), "services:\n  intent: project:1\n  planning: project:2\n")
	cfg, err := Load("custom.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.Services.Intent != "explicit:1" || cfg.Services.Planning != "project:2" {
		t.Errorf("services = %+v, want intent from --config and planning from ./agentmesh.yaml", cfg.Services)
	}
	if _, err := Load("missing.yaml"); !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, ErrInvalid) {
		t.Errorf("Load(missing.yaml) = %v, want a not-exist ErrInvalid error", err)
	}
}
