package action

import (
	"fmt"
	"math"
	"strconv"

	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/protobuf/types/known/structpb"
)

// checkFinite refuses a number JSON cannot hold, NaN or an infinity, anywhere in a call's
// arguments, naming where it is: the arguments are JSON (the model's, and what MCP and REST
// tools are sent), but the protobuf Struct that carries them holds any double. It allocates
// only for arguments it refuses.
func checkFinite(args *structpb.Struct) error {
	for name, v := range args.GetFields() {
		if where, n, bad := nonFinite(v); bad {
			return stageerr.Invalid(
				"arguments%s%s: %s is no JSON number (JSON has no NaN or infinity)",
				member(name), where, strconv.FormatFloat(n, 'g', -1, 64))
		}
	}
	return nil
}

// nonFinite finds a NaN or an infinity in v, returning where it is below v (its members and
// items, as member and "[i]" write them) and the number.
func nonFinite(v *structpb.Value) (where string, n float64, bad bool) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		if math.IsNaN(k.NumberValue) || math.IsInf(k.NumberValue, 0) {
			return "", k.NumberValue, true
		}
	case *structpb.Value_StructValue:
		for name, f := range k.StructValue.GetFields() {
			if where, n, bad := nonFinite(f); bad {
				return member(name) + where, n, true
			}
		}
	case *structpb.Value_ListValue:
		for i, item := range k.ListValue.GetValues() {
			if where, n, bad := nonFinite(item); bad {
				return fmt.Sprintf("[%d]%s", i, where), n, true
			}
		}
	}
	return "", 0, false
}

// member writes the access of an object's member name: ".name" for a name of letters, digits,
// _ and -, else `["name"]`, quoted.
func member(name string) string {
	for _, r := range name {
		word := r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' ||
			r >= 'A' && r <= 'Z'
		if !word {
			return fmt.Sprintf("[%q]", name)
		}
	}
	if name == "" {
		return `[""]`
	}
	return "." + name
}
