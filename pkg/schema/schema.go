// Package schema compiles JSON schemas (draft 2020-12 and earlier, with
// github.com/santhosh-tekuri/jsonschema) the way every agentmesh service does: one schema per
// compiler, and no external $ref ever loaded (file://, http://), so a schema from a request
// cannot make a service read a file or call a URL. Message renders a validation failure as one
// line that names each offending property.
package schema

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/textcut"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schema is a compiled JSON schema.
type Schema = jsonschema.Schema

// Compile compiles the JSON schema doc (decoded JSON) named url (e.g.
// "tool:///arguments.json"), which only names it in messages. A schema whose references make
// some part of it apply itself again to the same value ({"$ref": "#"}, or a property's schema
// whose $ref or allOf leads back to it) is an error: the library finds such a cycle only when
// it validates a value that reaches it, so every such value would be refused later as the
// caller's bad input. Recursion that descends into the value (a tree) is no cycle.
func Compile(url string, doc map[string]any) (*Schema, error) {
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no external $ref is ever loaded
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, err
	}
	if cycle := inPlaceCycle(sch); cycle != "" {
		return nil, fmt.Errorf("%s: %s", url, cycle)
	}
	// $recursiveRef and $dynamicRef resolve as a value is validated: a few trivial values
	// find a cycle through them that loops before anything of a value is read.
	for _, v := range []any{nil, map[string]any{}, []any{}, "", 0.0, false} {
		if cycle := refCycle(sch.Validate(v)); cycle != "" {
			return nil, fmt.Errorf("%s: %s", url, cycle)
		}
	}
	return sch, nil
}

// inPlaceCycle is the message of a reference cycle among the schemas of sch that apply to the
// value their parent applies to ($ref, allOf, anyOf, oneOf, not, if, then, else,
// dependentSchemas, dependencies), or "" when there is none. It looks at every schema of sch,
// also those that only some part of a value reaches.
func inPlaceCycle(sch *Schema) string {
	all, seen := []*Schema{sch}, map[*Schema]bool{sch: true}
	for i := 0; i < len(all); i++ {
		for _, next := range slices.Concat(sameValue(all[i]), partsOfValue(all[i])) {
			if !seen[next] {
				seen[next] = true
				all = append(all, next)
			}
		}
	}
	const (
		visiting = 1 + iota
		done
	)
	state := map[*Schema]int{}
	var path []*Schema
	var visit func(s *Schema) string
	visit = func(s *Schema) string {
		switch state[s] {
		case visiting:
			var locs []string
			for _, p := range path[slices.Index(path, s):] {
				locs = append(locs, p.Location)
			}
			return fmt.Sprintf("reference cycle: %s (each applies the next to the same value)",
				strings.Join(append(locs, s.Location), " → "))
		case done:
			return ""
		}
		state[s] = visiting
		path = append(path, s)
		for _, next := range sameValue(s) {
			if m := visit(next); m != "" {
				return m
			}
		}
		path = path[:len(path)-1]
		state[s] = done
		return ""
	}
	for _, s := range all {
		if m := visit(s); m != "" {
			return m
		}
	}
	return ""
}

// sameValue returns the schemas s applies to the value s itself applies to, but for those of
// $recursiveRef and $dynamicRef, which depend on the path of a validation.
func sameValue(s *Schema) []*Schema {
	out := slices.Concat(s.AllOf, s.AnyOf, s.OneOf, []*Schema{s.Ref, s.Not, s.If, s.Then, s.Else})
	for _, name := range slices.Sorted(maps.Keys(s.DependentSchemas)) {
		out = append(out, s.DependentSchemas[name])
	}
	for _, name := range slices.Sorted(maps.Keys(s.Dependencies)) {
		if d, ok := s.Dependencies[name].(*Schema); ok {
			out = append(out, d)
		}
	}
	return slices.DeleteFunc(out, func(s *Schema) bool { return s == nil })
}

// partsOfValue returns the other schemas s holds: those it applies to a part of the value (a
// property, an item, a property's name, decoded content), and the targets of $recursiveRef and
// $dynamicRef.
func partsOfValue(s *Schema) []*Schema {
	out := slices.Concat(s.PrefixItems, []*Schema{s.PropertyNames, s.UnevaluatedProperties, s.Contains,
		s.Items2020, s.UnevaluatedItems, s.ContentSchema, s.RecursiveRef})
	if s.DynamicRef != nil {
		out = append(out, s.DynamicRef.Ref)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		out = append(out, s.Properties[name])
	}
	for _, p := range s.PatternProperties { // Regexp keys do not sort; any order finds a cycle
		out = append(out, p)
	}
	for _, v := range []any{s.AdditionalProperties, s.AdditionalItems, s.Items} {
		switch v := v.(type) {
		case *Schema:
			out = append(out, v)
		case []*Schema:
			out = append(out, v...)
		}
	}
	return slices.DeleteFunc(out, func(s *Schema) bool { return s == nil })
}

// refCycle is the message of a reference cycle among the failures of a validation, or "".
func refCycle(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return ""
	}
	if _, ok := ve.ErrorKind.(*kind.RefCycle); ok {
		return ve.ErrorKind.LocalizedString(printer)
	}
	for _, c := range ve.Causes {
		if m := refCycle(c); m != "" {
			return m
		}
	}
	return ""
}

// printer renders validation messages in English.
var printer = message.NewPrinter(language.English)

// Bounds of Message: a value, or a value's property names, may be of any size, and the
// library quotes them whole, where the message goes into a gRPC status (a status of megabytes
// is more than a client takes in its trailers, which breaks its connection) and before a model.
const (
	// maxProblems is how many failures Message describes; the rest are counted.
	maxProblems = 20
	// maxProblemBytes bounds the description of one failure: a longer one keeps its start (the
	// property) and its end (the rule), cut in the middle.
	maxProblemBytes = 256
)

// Message turns a validation failure into one line that names each offending property and
// what is wrong with it, e.g. `"limit": must be <= 20 but found 50`; any other error is its
// own message. It names at most maxProblems failures, counting the others, each in at most
// maxProblemBytes.
func Message(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var problems []string
	more := 0
	collect(ve, &problems, &more)
	msg := strings.Join(problems, "; ")
	if more > 0 {
		msg += fmt.Sprintf("; and %d more", more)
	}
	return msg
}

// collect appends a description of every leaf failure under ve, up to maxProblems, and
// counts the others in more.
func collect(ve *jsonschema.ValidationError, out *[]string, more *int) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collect(c, out, more)
		}
		return
	}
	if len(*out) == maxProblems {
		*more++
		return
	}
	msg := ve.ErrorKind.LocalizedString(printer)
	if len(ve.InstanceLocation) > 0 {
		msg = fmt.Sprintf("%q: %s", strings.Join(ve.InstanceLocation, "."), msg)
	}
	*out = append(*out, textcut.Middle(msg, maxProblemBytes, "…"))
}
