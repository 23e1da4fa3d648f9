// Package schema compiles JSON schemas (draft 2020-12 and earlier, with
// github.com/santhosh-tekuri/jsonschema) the way every agentmesh service does: one schema per
// compiler, and no external $ref ever loaded (file://, http://), so a schema from a request
// cannot make a service read a file or call a URL. Message renders a validation failure as one
// line that names each offending property.
package schema

import (
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schema is a compiled JSON schema.
type Schema = jsonschema.Schema

// Compile compiles the JSON schema doc (decoded JSON) named url (e.g.
// "tool:///arguments.json"), which only names it in messages. A schema whose $ref resolves to
// itself before it reads anything of a value ({"$ref": "#"}) is an error: the library finds
// such a cycle only when it validates, so every value would be refused later as the caller's
// bad input. A cycle reached only through some property of a value is still found then.
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
	for _, v := range []any{nil, map[string]any{}, []any{}, "", 0.0, false} {
		if cycle := refCycle(sch.Validate(v)); cycle != "" {
			return nil, fmt.Errorf("%s: %s", url, cycle)
		}
	}
	return sch, nil
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

// Message turns a validation failure into one line that names each offending property and
// what is wrong with it, e.g. `"limit": must be <= 20 but found 50`; any other error is its
// own message.
func Message(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var problems []string
	collect(ve, &problems)
	return strings.Join(problems, "; ")
}

// collect appends a description of every leaf failure under ve.
func collect(ve *jsonschema.ValidationError, out *[]string) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collect(c, out)
		}
		return
	}
	msg := ve.ErrorKind.LocalizedString(printer)
	if len(ve.InstanceLocation) > 0 {
		msg = fmt.Sprintf("%q: %s", strings.Join(ve.InstanceLocation, "."), msg)
	}
	*out = append(*out, msg)
}
