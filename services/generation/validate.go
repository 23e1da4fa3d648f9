package generation

import (
	"slices"
	"strings"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/runid"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// maxTargetNameBytes is the longest provider or model name a target may give, as the public
// API's overrides.targets: the model names the chat span ("chat <model>") and labels the
// metrics, which a name of megabytes would make larger than an OTLP export request takes.
const maxTargetNameBytes = 256

// validate checks a generate request and returns the provider its target names. A
// tool_choice that is neither a mode nor the name of an offered tool is refused here (without
// tools it is not sent, so it is not checked): sent on, it became a named function choice
// every provider refused, target after target.
func (s *Service) validate(req *generationv1.GenerateRequest) (Provider, error) {
	if len(req.GetMessages()) == 0 {
		return nil, invalid("messages must not be empty")
	}
	// A request for no run (run_id empty) is taken: the run only scopes tracing and caching.
	if err := runid.CheckField("run_id", req.GetRunId()); err != nil {
		return nil, invalid("%v", err)
	}
	p, err := s.provider(req.GetTarget())
	if err != nil {
		return nil, err
	}
	for i, m := range req.GetMessages() {
		if m.GetRole() == typev1.Role_ROLE_UNSPECIFIED {
			return nil, invalid("messages[%d] has no role (ROLE_UNSPECIFIED)", i)
		}
	}
	names := make([]string, 0, len(req.GetTools()))
	for i, t := range req.GetTools() {
		if t.GetName() == "" {
			return nil, invalid("tools[%d] has no name", i)
		}
		names = append(names, t.GetName())
	}
	switch choice := req.GetToolChoice(); choice {
	case "", "auto", "required", "none":
	default:
		if len(names) > 0 && !slices.Contains(names, choice) {
			return nil, invalid("tool_choice %q must be auto, required, none or the name of an offered tool (%s)", choice, strings.Join(names, ", "))
		}
	}
	return p, nil
}

// provider returns the provider a target names. Names over maxTargetNameBytes are refused
// before any is quoted in an error.
func (s *Service) provider(target *typev1.Target) (Provider, error) {
	name := target.GetProvider()
	for _, f := range []struct{ field, value string }{{"target.provider", name}, {"target.model", target.GetModel()}} {
		if n := len(f.value); n > maxTargetNameBytes {
			return nil, invalid("%s: at most %d bytes, got %d", f.field, maxTargetNameBytes, n)
		}
	}
	p, ok := s.providers[name]
	switch {
	case name == "":
		return nil, invalid("target.provider must be set; configured providers: %s", s.providerList())
	case !ok:
		return nil, invalid("unknown provider %q in target.provider; configured providers: %s", name, s.providerList())
	case target.GetModel() == "":
		return nil, invalid("target.model must not be empty")
	}
	return p, nil
}

// providerList names the configured providers, sorted.
func (s *Service) providerList() string {
	names := make([]string, 0, len(s.providers))
	for name := range s.providers {
		names = append(names, name)
	}
	if len(names) == 0 {
		return "none"
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// invalid is an INVALID_INPUT error of this stage.
func invalid(format string, args ...any) *stageerr.Error {
	e := stageerr.Invalid(format, args...)
	e.Stage = stageName
	return e
}
