// Package target holds the rule of a provider/model target's names that more than one part of
// the mesh applies: the public API's overrides, the generation stage, the recovery stage and
// the configuration keep the same bound.
package target

import (
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// MaxNameBytes is the longest provider or model name a target may give: room for any model's
// name (a Bedrock inference profile's ARN is some 100 bytes). The model names the generation
// stage's chat spans ("chat <model>") and labels its metrics, which a name of megabytes would
// make larger than an OTLP export request takes.
const MaxNameBytes = 256

// CheckNames returns an INVALID_INPUT error naming field.provider or field.model when a name of
// t is over MaxNameBytes, nil otherwise.
func CheckNames(field string, t *typev1.Target) error {
	for _, f := range [...]struct{ name, value string }{{"provider", t.GetProvider()}, {"model", t.GetModel()}} {
		if n := len(f.value); n > MaxNameBytes {
			return stageerr.Invalid("%s.%s: at most %d bytes, got %d", field, f.name, MaxNameBytes, n)
		}
	}
	return nil
}
