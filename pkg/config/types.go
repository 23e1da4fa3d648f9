package config

import (
	"fmt"
	"math"
	"reflect"

	"gopkg.in/yaml.v3"
)

// checkType returns the error of a value n at path that the decoder cannot put into a field of
// type t (a pointer's element, the caller has taken it), naming the key and what it takes, or
// nil. The decoder's own error named the line and the Go type ("cannot unmarshal !!str `ten`
// into int32"), not the key. An empty value (null) leaves the field as it is.
func checkType(n *yaml.Node, t reflect.Type, path []string) error {
	if isNull(n) {
		return nil
	}
	key := keyPath(path)
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		if n.Kind != yaml.MappingNode {
			return fmt.Errorf("line %d: %s must be a mapping", n.Line, key)
		}
		return nil
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return fmt.Errorf("line %d: %s must be a list", n.Line, key)
		}
		return nil
	}
	rule := scalarRule(t)
	if rule == "" {
		return nil // any value (a schema's map[string]any)
	}
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: %s must be %s", n.Line, key, rule)
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		return fmt.Errorf("line %d: %s is %s, which is not %s", n.Line, key, n.Value, rule)
	}
	return nil
}

// scalarRule says what a scalar field of type t takes: "a text", "true or false", "a number"
// or "a whole number from … to …"; "" for a type that takes any value.
func scalarRule(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a text"
	case reflect.Bool:
		return "true or false"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := t.Bits()
		return fmt.Sprintf("a whole number from %d to %d", int64(-1)<<(bits-1), int64(1)<<(bits-1)-1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("a whole number from 0 to %d", uint64(math.MaxUint64)>>(64-t.Bits()))
	}
	return ""
}
