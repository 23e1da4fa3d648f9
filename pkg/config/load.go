package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"

	"gopkg.in/yaml.v3"
)

// FileName is the name of a configuration file.
const FileName = "agentmesh.yaml"

// dotEnvName is the file next to a layer's file that defines its variables.
const dotEnvName = ".env"

// Layer is one configuration file.
type Layer struct {
	// Name identifies the layer in messages: explicit, project, user or system.
	Name string
	// Path is the file's path.
	Path string
	// Required makes a missing file an error; other missing layers are skipped.
	Required bool
}

// Layers returns the configuration layers, highest priority first: explicit (the --config
// path, required; left out when empty), project (./agentmesh.yaml), user
// ($HOME/.config/agentmesh/agentmesh.yaml; left out when there is no home directory) and
// system (/etc/agentmesh/agentmesh.yaml).
func Layers(explicit string) []Layer {
	var layers []Layer
	if explicit != "" {
		layers = append(layers, Layer{Name: "explicit", Path: explicit, Required: true})
	}
	layers = append(layers, Layer{Name: "project", Path: "./" + FileName})
	if home, err := os.UserHomeDir(); err == nil {
		layers = append(layers, Layer{Name: "user", Path: filepath.Join(home, ".config", "agentmesh", FileName)})
	}
	return append(layers, Layer{Name: "system", Path: "/etc/agentmesh/" + FileName})
}

// Load loads the configuration from the standard layers (see Layers), explicit being the
// --config path or "", and validates it.
func Load(explicit string) (*Config, error) {
	return LoadLayers(Layers(explicit))
}

// LoadLayers loads the configuration from layers, highest priority first: it starts from
// Default(), merges the layers from lowest to highest, fills in dependent defaults (the openai
// base URL, the default queue) and validates the result.
func LoadLayers(layers []Layer) (*Config, error) {
	merged, err := defaultTree()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	for i := len(layers) - 1; i >= 0; i-- {
		root, err := readLayer(layers[i])
		if err != nil {
			return nil, &LayerError{Layer: layers[i], Err: err}
		}
		if root != nil {
			mergeInto(merged, root)
		}
	}
	cfg := &Config{}
	if err := merged.Decode(cfg); err != nil {
		return nil, fmt.Errorf("%w: merging layers: %w", ErrInvalid, err)
	}
	cfg.fillDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// readLayer reads, checks and expands one layer. It returns nil for a missing optional file
// or an empty one.
func readLayer(l Layer) (*yaml.Node, error) {
	data, err := os.ReadFile(l.Path)
	if errors.Is(err, fs.ErrNotExist) && !l.Required {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		return nil, nil
	}
	f := &flattener{}
	root, err := f.flatten(doc.Content[0])
	if err != nil {
		return nil, err
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: the document must be a mapping of sections (services, providers, ...)", root.Line)
	}
	if errs := checkKeys(root, reflect.TypeFor[Config](), nil, false); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	dotEnv := filepath.Join(filepath.Dir(l.Path), dotEnvName)
	vars, err := readDotEnv(dotEnv)
	if err != nil {
		return nil, err
	}
	lookup := func(name string) (string, bool) {
		if v, ok := vars[name]; ok {
			return v, true
		}
		return os.LookupEnv(name)
	}
	if errs := expandTree(root, nil, lookup); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// Again, for the values a ${VAR} gave, and every value's type, now that each is known.
	if errs := checkKeys(root, reflect.TypeFor[Config](), nil, true); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// Report type errors here, with this layer's name and lines.
	if err := root.Decode(&Config{}); err != nil {
		return nil, err
	}
	return root, nil
}
