package action

import (
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"google.golang.org/protobuf/types/known/structpb"
)

// printer renders schema validation messages in English.
var printer = message.NewPrinter(language.English)

// compileSchema compiles a tool's argument schema once, at construction.
func compileSchema(name string, schema *structpb.Struct) (*jsonschema.Schema, error) {
	const url = "tool:///arguments.json" // one compiler per schema
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no external $ref is ever loaded (file://, http://)
	if err := c.AddResource(url, schema.AsMap()); err != nil {
		return nil, fmt.Errorf("tool %q: schema: %w", name, err)
	}
	compiled, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("tool %q: schema: %w", name, err)
	}
	return compiled, nil
}

// validationMessage turns a schema validation failure into one line that names each offending
// property and what is wrong with it, e.g. `"limit": must be <= 20 but found 50`.
func validationMessage(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var problems []string
	collectProblems(ve, &problems)
	return strings.Join(problems, "; ")
}

// collectProblems appends a description of every leaf failure under ve.
func collectProblems(ve *jsonschema.ValidationError, out *[]string) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collectProblems(c, out)
		}
		return
	}
	msg := ve.ErrorKind.LocalizedString(printer)
	if len(ve.InstanceLocation) > 0 {
		msg = fmt.Sprintf("%q: %s", strings.Join(ve.InstanceLocation, "."), msg)
	}
	*out = append(*out, msg)
}
