package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestVariableExpansion(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]layerFiles
		env   map[string]string
		check func(t *testing.T, cfg *Config)
	}{
		{
			name: "layer .env beats the environment",
			files: map[string]layerFiles{"project": {
				yaml:   "providers:\n  local: {type: openai, api_key: '${AM_TEST_KEY}'}\n",
				dotEnv: "# keys\nAM_TEST_KEY=from-dotenv\n",
			}},
			env: map[string]string{"AM_TEST_KEY": "from-env"},
			check: func(t *testing.T, cfg *Config) {
				if got := cfg.Providers["local"].APIKey; got != "from-dotenv" {
					t.Errorf("api_key = %q, want from-dotenv", got)
				}
			},
		},
		{
			name: "environment fills what .env lacks",
			files: map[string]layerFiles{"project": {
				yaml:   "providers:\n  local: {type: openai, api_key: 'Bearer ${AM_TEST_KEY}', base_url: '${AM_TEST_URL}'}\n",
				dotEnv: "AM_TEST_URL=http://localhost:1234/v1\n",
			}},
			env: map[string]string{"AM_TEST_KEY": "from-env"},
			check: func(t *testing.T, cfg *Config) {
				p := cfg.Providers["local"]
				if p.APIKey != "Bearer from-env" || p.BaseURL != "http://localhost:1234/v1" {
					t.Errorf("provider = %+v, want key from env and url from .env", p)
				}
			},
		},
		{
			// An unquoted ${X} set empty resolved to null, which the merge skips: the lower
			// layer's value stayed.
			name: "a variable set empty overrides a lower layer",
			files: map[string]layerFiles{
				"system":  {yaml: "nats:\n  url: nats://10.0.0.1:4222\n"},
				"project": {yaml: "nats:\n  url: ${AM_TEST_EMPTY}\n"},
			},
			env: map[string]string{"AM_TEST_EMPTY": ""},
			check: func(t *testing.T, cfg *Config) {
				if got := cfg.NATS.URL; got != "" {
					t.Errorf("nats.url = %q, want the project layer's empty value", got)
				}
			},
		},
		{
			name: ".env syntax: export, quotes, comments",
			files: map[string]layerFiles{"project": {
				yaml: "nats: {url: '${A}|${B}|${C}|${D}'}\n",
				dotEnv: "export A=plain # comment\n" +
					"B=\"two words\\n\"\n" +
					"C='single # kept'\n" +
					"  # indented comment\n\n" +
					"D=\n",
			}},
			check: func(t *testing.T, cfg *Config) {
				if got, want := cfg.NATS.URL, "plain|two words\n|single # kept|"; got != want {
					t.Errorf("nats.url = %q, want %q", got, want)
				}
			},
		},
		{
			// An inline comment after a quoted value was refused ("malformed double-quoted
			// value", "unterminated single-quoted value"), one after a tab was kept in the
			// value: common .env files have them, and docker compose reads them so.
			name: ".env syntax: inline comments after quoted and bare values",
			files: map[string]layerFiles{"project": {
				yaml: "nats: {url: '${A}|${B}|${C}|${D}|${E}|${F}|${G}'}\n",
				dotEnv: "A=\"quoted # kept\" # comment\n" +
					"B='single # kept'\t# comment\n" +
					"C=\"esc\\\" # kept\"   \n" +
					"D=bare\t# comment\n" +
					"E=no#comment\n" +
					"F= # only a comment\n" +
					"G=#kept\n",
			}},
			check: func(t *testing.T, cfg *Config) {
				want := `quoted # kept|single # kept|esc" # kept|bare|no#comment||#kept`
				if got := cfg.NATS.URL; got != want {
					t.Errorf("nats.url = %q, want %q", got, want)
				}
			},
		},
		{
			name: "a plain expanded scalar can be a number",
			files: map[string]layerFiles{"project": {
				yaml:   "defaults:\n  max_turns: ${TURNS}\nmemory:\n  quota_per_user: ${QUOTA}\n",
				dotEnv: "TURNS=25\nQUOTA=7\n",
			}},
			check: func(t *testing.T, cfg *Config) {
				if cfg.Defaults.MaxTurns != 25 || cfg.Memory.QuotaPerUser != 7 {
					t.Errorf("max_turns = %d, quota = %d; want 25 and 7", cfg.Defaults.MaxTurns, cfg.Memory.QuotaPerUser)
				}
			},
		},
		{
			name: "parameters placeholders, $${ escapes and MCP env/headers are kept",
			files: map[string]layerFiles{"project": {
				yaml: `
rest_tools:
  get_user:
    description: 'Fetch ${parameters.id}; costs $${PRICE}'
    method: POST
    url: 'https://api.example.com/users/${parameters.id}?key=${API_KEY}'
    headers: {Authorization: 'Bearer ${API_KEY}', X-Trace: '${parameters.trace}'}
    body: '{"id": "${parameters.id}"}'
mcp_servers:
  fs:
    command: npx
    args: ['${WORKDIR}']
    env: {TOKEN: '${UNSET_SECRET}', HOME: '$${HOME}'}
  remote:
    url: https://mcp.example.com
    headers: {Authorization: 'Bearer ${UNSET_SECRET}'}
`,
				dotEnv: "API_KEY=k1\nWORKDIR=/srv/data\n",
			}},
			check: func(t *testing.T, cfg *Config) {
				rt := cfg.RestTools["get_user"]
				wantRT := RestTool{
					Description: "Fetch ${parameters.id}; costs ${PRICE}",
					Method:      "POST",
					URL:         "https://api.example.com/users/${parameters.id}?key=k1",
					Headers:     map[string]string{"Authorization": "Bearer k1", "X-Trace": "${parameters.trace}"},
					Body:        `{"id": "${parameters.id}"}`,
				}
				if !reflect.DeepEqual(rt, wantRT) {
					t.Errorf("rest_tools.get_user = %+v, want %+v", rt, wantRT)
				}
				fs := cfg.MCPServers["fs"]
				if fs.Args[0] != "/srv/data" {
					t.Errorf("mcp_servers.fs.args = %v, want the expanded WORKDIR", fs.Args)
				}
				if want := map[string]string{"TOKEN": "${UNSET_SECRET}", "HOME": "$${HOME}"}; !reflect.DeepEqual(fs.Env, want) {
					t.Errorf("mcp_servers.fs.env = %v, want %v verbatim", fs.Env, want)
				}
				if got := cfg.MCPServers["remote"].Headers["Authorization"]; got != "Bearer ${UNSET_SECRET}" {
					t.Errorf("mcp_servers.remote.headers.Authorization = %q, want it verbatim", got)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			tt.check(t, mustLoad(t, writeLayers(t, tt.files)))
		})
	}
}

func TestMissingVariableNamesLayerAndVariable(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]layerFiles
		layer   int // index in layerOrder of the layer at fault
		key     string
		varName string
	}{
		{
			name:  "unset everywhere",
			files: map[string]layerFiles{"project": {yaml: "providers:\n  local: {type: openai, api_key: '${AM_TEST_UNSET_KEY}'}\n"}},
			layer: 1, key: "providers.local.api_key", varName: "AM_TEST_UNSET_KEY",
		},
		{
			name: "another layer's .env does not apply",
			files: map[string]layerFiles{
				"user":   {yaml: "nats: {url: nats://a}\n", dotEnv: "AM_TEST_UNSET_KEY=only-for-user\n"},
				"system": {yaml: "mcp_servers:\n  fs: {command: x, args: [ok, '${AM_TEST_UNSET_KEY}']}\n"},
			},
			layer: 3, key: "mcp_servers.fs.args[1]", varName: "AM_TEST_UNSET_KEY",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			layers := writeLayers(t, tt.files)
			_, err := LoadLayers(layers)
			l := layers[tt.layer]
			want := `config layer "` + l.Name + `" (` + l.Path + `): ` + tt.key + `: variable ` + tt.varName + ` is not set`
			if err == nil || err.Error() != want {
				t.Fatalf("LoadLayers error = %v\nwant %s", err, want)
			}
			var missing *MissingVariableError
			if !errors.As(err, &missing) || missing.Variable != tt.varName || missing.Key != tt.key {
				t.Errorf("error does not carry MissingVariableError{%s, %s}: %#v", tt.key, tt.varName, missing)
			}
			var le *LayerError
			if !errors.As(err, &le) || le.Layer != l {
				t.Errorf("error does not carry the layer %+v", l)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Error("error does not wrap ErrInvalid")
			}
		})
	}
}

// TestParametersPlaceholderOutsideRestTools: ${parameters.x} is a REST tool's placeholder,
// filled in from a call's arguments (seed 000 §7: not expanded in REST tool payloads).
// Anywhere else nothing ever fills it in: kept, an API key or a server's argument would be the
// placeholder's text, so it is refused like a variable that is not set, naming the layer.
func TestParametersPlaceholderOutsideRestTools(t *testing.T) {
	tests := []struct{ name, yaml, key string }{
		{"a provider's api_key", "providers:\n  local: {type: openai, api_key: '${parameters.key}'}\n", "providers.local.api_key"},
		{"an MCP server's argument", "mcp_servers:\n  fs: {command: npx, args: ['--root=${parameters.dir}']}\n", "mcp_servers.fs.args[0]"},
		{"a prompt", "prompts:\n  system: 'Answer in ${parameters.lang}.'\n", "prompts.system"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			layers := writeLayers(t, map[string]layerFiles{"project": {yaml: tt.yaml}})
			_, err := LoadLayers(layers)
			l := layers[1]
			ref := tt.yaml[strings.Index(tt.yaml, "${"):]
			ref = ref[:strings.IndexByte(ref, '}')+1]
			want := `config layer "project" (` + l.Path + `): ` + tt.key + `: ` + ref +
				` is a REST tool's placeholder, filled in only under rest_tools (write $` + ref + ` for the text itself)`
			if err == nil || err.Error() != want {
				t.Fatalf("LoadLayers error = %v\nwant %s", err, want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Error("error does not wrap ErrInvalid")
			}
		})
	}
	// Escaped, it is the text itself.
	cfg := mustLoad(t, writeLayers(t, map[string]layerFiles{"project": {yaml: "prompts:\n  system: 'Say $${parameters.x}.'\n"}}))
	if got := cfg.Prompts.System; got != "Say ${parameters.x}." {
		t.Errorf("prompts.system = %q", got)
	}
}

func TestExpandString(t *testing.T) {
	vars := map[string]string{"A": "1", "B_2": "two"}
	lookup := func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
	tests := []struct {
		in, want, wantErr string
	}{
		{"no variables", "no variables", ""},
		{"${A}", "1", ""},
		{"x${A}y${B_2}z", "x1ytwoz", ""},
		{"$A and $", "$A and $", ""},
		{"$${A}", "${A}", ""},
		{"$$${A}", "$${A}", ""}, // a lone $, then the escape
		{"${parameters.id}/${A}", "${parameters.id}/1", ""},
		{"${MISSING}", "", "variable MISSING is not set"},
		{"${}", "", "invalid variable reference"},
		{"${a-b}", "", "invalid variable reference"},
		{"${A", "", "unterminated"},
	}
	for _, tt := range tests {
		got, err := expandString(tt.in, lookup, true)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("expandString(%q) = %q, %v; want error containing %q", tt.in, got, err, tt.wantErr)
			}
		case err != nil || got != tt.want:
			t.Errorf("expandString(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
