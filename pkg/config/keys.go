package config

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// checkKeys returns an error for every mapping key below n that the type t does not have, for
// every fraction where a whole number goes (the decoder truncates it: max_turns: 2.9 would be
// 2), and for every list of the wrong length where an array goes (a cycle_forbid pair). path is
// n's key path. With values, every value the decoder cannot take is an error too (checkType):
// values are checked once their ${VAR}s are expanded.
func checkKeys(n *yaml.Node, t reflect.Type, path []string, values bool) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if values {
		if err := checkType(n, t, path); err != nil {
			return []error{err}
		}
	}
	var errs []error
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ft, ok := fields[k.Value]
			if !ok {
				errs = append(errs, unknownKey(k, path, fields))
				continue
			}
			errs = append(errs, checkKeys(v, ft, append(path, k.Value), values)...)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			at := append(path, n.Content[i].Value)
			errs = append(errs, checkKeys(n.Content[i+1], t.Elem(), at, values)...)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return nil
		}
		if t.Kind() == reflect.Array && len(n.Content) != t.Len() { // the decoder's error names no key
			return []error{fmt.Errorf("line %d: %s has %d items, want %d", n.Line, keyPath(path), len(n.Content), t.Len())}
		}
		for i, c := range n.Content {
			at := append(path, "["+strconv.Itoa(i)+"]")
			errs = append(errs, checkKeys(c, t.Elem(), at, values)...)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" {
			if f, err := strconv.ParseFloat(n.Value, 64); err != nil || f != math.Trunc(f) {
				errs = append(errs, fmt.Errorf("line %d: %s is %s, which is not a whole number", n.Line, keyPath(path), n.Value))
			}
		}
	}
	return errs
}

// unknownKey describes an unknown key k found at path.
func unknownKey(k *yaml.Node, path []string, fields map[string]reflect.Type) error {
	where := ""
	if len(path) > 0 {
		where = " in " + keyPath(path)
	}
	known := make([]string, 0, len(fields))
	for name := range fields {
		known = append(known, name)
	}
	slices.Sort(known)
	return fmt.Errorf("line %d: unknown key %q%s (known keys: %s)", k.Line, k.Value, where, strings.Join(known, ", "))
}

// yamlFields maps the YAML keys of struct type t to their field types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	fields := make(map[string]reflect.Type, t.NumField())
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = strings.ToLower(f.Name)
		}
		fields[name] = f.Type
	}
	return fields
}
