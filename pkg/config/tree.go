package config

import (
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"
)

// maxNodes bounds the size of a layer once its aliases are expanded.
const maxNodes = 1 << 20

// errTooLarge reports a layer whose aliases expand beyond maxNodes nodes.
var errTooLarge = fmt.Errorf("the document expands to more than %d nodes (aliases nested too deep?)", maxNodes)

// flattener copies a YAML tree, replacing aliases by copies of their anchors and merge keys
// (<<) by the merged keys, so later steps see plain mappings, sequences and scalars.
type flattener struct {
	nodes int
}

// flatten returns a plain copy of n.
func (f *flattener) flatten(n *yaml.Node) (*yaml.Node, error) {
	if f.nodes++; f.nodes > maxNodes {
		return nil, errTooLarge
	}
	if n.Kind == yaml.AliasNode {
		return f.flatten(n.Alias)
	}
	out := *n
	out.Content = nil
	out.Anchor = ""
	switch n.Kind {
	case yaml.SequenceNode:
		for _, c := range n.Content {
			fc, err := f.flatten(c)
			if err != nil {
				return nil, err
			}
			out.Content = append(out.Content, fc)
		}
	case yaml.MappingNode:
		pairs, err := f.mappingPairs(n)
		if err != nil {
			return nil, err
		}
		out.Content = pairs
	}
	return &out, nil
}

// mappingPairs returns the flattened key/value pairs of mapping n: its own keys first, then the
// keys of merged mappings it does not set itself (an earlier merge source wins).
func (f *flattener) mappingPairs(n *yaml.Node) ([]*yaml.Node, error) {
	var own, merged []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		fv, err := f.flatten(v)
		if err != nil {
			return nil, err
		}
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!merge" {
			fk := *k
			own = append(own, &fk, fv)
			continue
		}
		sources := []*yaml.Node{fv}
		if fv.Kind == yaml.SequenceNode {
			sources = fv.Content
		}
		for _, src := range sources {
			if src.Kind != yaml.MappingNode {
				return nil, fmt.Errorf("line %d: a merge key (<<) needs a mapping or a list of mappings", k.Line)
			}
			merged = append(merged, src.Content...)
		}
	}
	out := own
	for i := 0; i+1 < len(merged); i += 2 {
		if findKey(out, merged[i].Value) < 0 {
			out = append(out, merged[i], merged[i+1])
		}
	}
	return out, nil
}

// findKey returns the index of key in the key/value pairs, or -1.
func findKey(pairs []*yaml.Node, key string) int {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i].Value == key {
			return i
		}
	}
	return -1
}

// isNull reports whether n is an empty value (null, ~ or nothing).
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// mergeInto merges the mapping src of a higher layer into dst, in place: mappings merge key by
// key, a null value in src leaves dst alone, anything else in src replaces dst's value.
func mergeInto(dst, src *yaml.Node) {
	for i := 0; i+1 < len(src.Content); i += 2 {
		k, v := src.Content[i], src.Content[i+1]
		if isNull(v) {
			continue
		}
		j := findKey(dst.Content, k.Value)
		switch {
		case j < 0:
			dst.Content = append(dst.Content, k, v)
		case dst.Content[j+1].Kind == yaml.MappingNode && v.Kind == yaml.MappingNode:
			mergeInto(dst.Content[j+1], v)
		default:
			dst.Content[j+1] = v
		}
	}
}

// defaultTree returns Default() as a YAML mapping, the base every layer merges into.
func defaultTree() (*yaml.Node, error) {
	data, err := yaml.Marshal(Default())
	if err != nil {
		return nil, fmt.Errorf("encode defaults: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("decode defaults: %w", err)
	}
	if len(doc.Content) == 0 {
		return nil, errors.New("decode defaults: empty document")
	}
	return doc.Content[0], nil
}
