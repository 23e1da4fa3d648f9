package jsonrepair

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Result is a decoded JSON value and how it was obtained.
type Result struct {
	// Value is the decoded value, as encoding/json decodes into an any: map[string]any,
	// []any, string, float64, bool or nil.
	Value any
	// Text is the JSON text that was decoded: the input itself after a native parse, else the
	// repaired text.
	Text string
	// Steps lists the repairs applied, in order; it is empty after a native parse.
	Steps []string
}

// Repaired reports whether the value needed repairs.
func (r *Result) Repaired() bool { return len(r.Steps) > 0 }

// Error is a failure to decode text, after repair when a repair was possible.
type Error struct {
	// Kind is the JSON type found where ParseObject wanted an object ("array", "string",
	// "number", "boolean" or "null"); it is "" when the text is not JSON at all.
	Kind string
	// Steps are the repairs that were applied before the final parse, if any.
	Steps []string
	// Native is the error of the first, native parse; nil when the text parsed but was not
	// an object.
	Native error
	// Repaired is the error of the parse after repair; nil when nothing could be repaired or
	// the repaired text parsed.
	Repaired error
}

// Error says why the text could not be used, e.g. "not valid JSON (...) and could not be
// repaired" or "a JSON array, not an object".
func (e *Error) Error() string {
	switch {
	case e.Kind != "" && len(e.Steps) > 0:
		return fmt.Sprintf("a JSON %s after repair, not an object", e.Kind)
	case e.Kind != "":
		return fmt.Sprintf("a JSON %s, not an object", e.Kind)
	case e.Repaired == nil:
		return fmt.Sprintf("not valid JSON (%v) and could not be repaired", e.Native)
	}
	return fmt.Sprintf("not valid JSON (%v) and still not after repair (%v)", e.Native, e.Repaired)
}

// Parse decodes text as JSON: natively first, and when that fails, after Repair. It returns
// an *Error when the text is not JSON even after repair.
func Parse(text string) (*Result, error) {
	v, nativeErr := decode(text)
	if nativeErr == nil {
		return &Result{Value: v, Text: text}, nil
	}
	fixed, steps := Repair(text)
	if len(steps) == 0 {
		return nil, &Error{Native: nativeErr}
	}
	v, err := decode(fixed)
	if err != nil {
		return nil, &Error{Steps: steps, Native: nativeErr, Repaired: err}
	}
	return &Result{Value: v, Text: fixed, Steps: steps}, nil
}

// ParseObject is Parse for text that must hold a JSON object: on success Value is a
// map[string]any. An object sent as a JSON string (`"{\"a\": 1}"`) is decoded from the
// string, recorded as a repair step. Any other kind of value is an *Error naming its kind.
func ParseObject(text string) (*Result, error) {
	res, err := Parse(text)
	if err != nil {
		return nil, err
	}
	if inner, ok := res.Value.(string); ok {
		if nested, err := ParseObject(inner); err == nil {
			nested.Steps = append([]string{"decoded an object sent as a JSON string"}, nested.Steps...)
			return nested, nil
		}
	}
	if _, ok := res.Value.(map[string]any); !ok {
		return nil, &Error{Kind: Kind(res.Value), Steps: res.Steps}
	}
	return res, nil
}

// Kind names the JSON type of a decoded value: object, array, string, number, boolean or
// null.
func Kind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64, json.Number:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// errEmpty is the native parse error of blank text.
var errEmpty = errors.New("empty text")

// decode parses text natively; blank text is an error like any other invalid JSON.
func decode(text string) (any, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errEmpty
	}
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return nil, err
	}
	return v, nil
}
