package config_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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

// referencePath is the configuration reference: a table row for every key of agentmesh.yaml.
var referencePath = filepath.Join("..", "..", "docs", "configuration.md")

// referenceRows returns the rows of the configuration reference's tables, by the key in their
// first cell, with their second cell, the default.
func referenceRows(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for line := range strings.Lines(string(doc)) {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `") || len(cells) < 4 {
			continue
		}
		key := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if _, dup := rows[key]; dup {
			t.Errorf("%s: two rows of %s", referencePath, key)
		}
		rows[key] = cells[2]
	}
	return rows
}

// configKeys adds to keys every key the loader knows below prefix, a value of type typ, with its
// value in v (the invalid Value where there is none, below a map or a list). A map's entries
// are "<name>", a list's items "[]"; a key holding keys of its own (a section, a provider) has no
// row of its own, but a target (provider and model) is one key, as its documentation names it.
func configKeys(typ reflect.Type, v reflect.Value, prefix string, keys map[string]reflect.Value) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
		if v.IsValid() && !v.IsNil() {
			v = v.Elem()
		} else {
			v = reflect.Value{}
		}
	}
	if !holdsKeys(typ) {
		keys[prefix] = v
		return
	}
	switch typ.Kind() {
	case reflect.Map:
		configKeys(typ.Elem(), reflect.Value{}, prefix+".<name>", keys)
	case reflect.Slice:
		configKeys(typ.Elem(), reflect.Value{}, prefix+"[]", keys)
	case reflect.Struct:
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			var fv reflect.Value
			if v.IsValid() {
				fv = v.Field(i)
			}
			configKeys(f.Type, fv, strings.TrimPrefix(prefix+"."+name, "."), keys)
		}
	}
}

// holdsKeys reports whether a value of type typ (not a pointer) holds keys of its own: a
// section, or a map or list of them, but not a target.
func holdsKeys(typ reflect.Type) bool {
	target := reflect.TypeFor[config.Target]()
	switch typ.Kind() {
	case reflect.Struct:
		return typ != target
	case reflect.Map, reflect.Slice:
		return typ.Elem().Kind() == reflect.Struct && typ.Elem() != target
	}
	return false
}

// TestConfigurationReference keeps the configuration reference (docs/configuration.md) and the
// loader in step: every key the loader knows has a row, every row is a key it knows, and a
// row's default shows the value Default gives the key, when that is not zero. Before the
// reference, the README named neither providers.<name>.timeout_ms nor rest_tools.<name>.body.
func TestConfigurationReference(t *testing.T) {
	rows := referenceRows(t)
	keys := map[string]reflect.Value{}
	configKeys(reflect.TypeFor[config.Config](), reflect.ValueOf(config.Default()).Elem(), "", keys)
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		def, ok := rows[key]
		if !ok {
			t.Errorf("%s has no row for %s, a key the loader knows", referencePath, key)
			continue
		}
		v := keys[key]
		if !v.IsValid() || v.IsZero() || v.Kind() == reflect.Slice || v.Kind() == reflect.Map {
			continue
		}
		if want := fmt.Sprintf("`%v`", v.Interface()); !strings.Contains(def, want) {
			t.Errorf("%s: the default of %s is %s; its row says %s", referencePath, key, want, strings.TrimSpace(def))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(rows)) {
		if _, ok := keys[key]; !ok {
			t.Errorf("%s has a row for %s, which is no key of the loader", referencePath, key)
		}
	}
}
