package generation

import (
	"slices"
	"strings"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/runid"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/target"
)

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
		switch _, known := typev1.Role_name[int32(m.GetRole())]; {
		case m.GetRole() == typev1.Role_ROLE_UNSPECIFIED:
			return nil, invalid("messages[%d] has no role (ROLE_UNSPECIFIED)", i)
		case !known:
			// The OpenAI adapter sent it on with an empty role, which the provider
			// refuses, and the Anthropic one took it for the user's.
			return nil, invalid("messages[%d].role %d is not one of its values", i, m.GetRole())
		}
	}
	if _, known := typev1.OutputFormat_name[int32(req.GetOutputFormat())]; !known {
		return nil, invalid("output_format %d is not one of its values", req.GetOutputFormat())
	}
	if err := checkSampling(req.GetSampling()); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(req.GetTools()))
	first := make(map[string]int, len(req.GetTools())) // the index of each name's first tool
	for i, t := range req.GetTools() {
		if t.GetName() == "" {
			return nil, invalid("tools[%d] has no name", i)
		}
		// Providers refuse two tools of one name (HTTP 400), target after target, and a
		// tool_choice or a call naming it could mean either.
		if j, dup := first[t.GetName()]; dup {
			return nil, invalid("tools[%d].name %q repeats tools[%d]'s", i, t.GetName(), j)
		}
		first[t.GetName()] = i
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

// checkSampling holds a request's sampling to the ranges the configuration's is held to:
// temperature 0 to 2, top_p 0 to 1 (NaN and infinities refused, which could not even be
// encoded as JSON), max_output_tokens not negative (0 leaves it unset; a negative one was
// taken as unset too, or sent on to the provider). Each provider may refuse a narrower range (Anthropic's temperature is 0
// to 1) with its own message.
func checkSampling(s *generationv1.Sampling) error {
	if s == nil {
		return nil
	}
	if s.Temperature != nil && !(s.GetTemperature() >= 0 && s.GetTemperature() <= 2) {
		return invalid("sampling.temperature must be between 0 and 2, got %g", s.GetTemperature())
	}
	if s.TopP != nil && !(s.GetTopP() >= 0 && s.GetTopP() <= 1) {
		return invalid("sampling.top_p must be between 0 and 1, got %g", s.GetTopP())
	}
	if s.GetMaxOutputTokens() < 0 {
		return invalid("sampling.max_output_tokens must not be negative (0 means the provider's "+
			"default), got %d", s.GetMaxOutputTokens())
	}
	return nil
}

// provider returns the provider a target names. Names over target.MaxNameBytes are refused
// before any is quoted in an error.
func (s *Service) provider(t *typev1.Target) (Provider, error) {
	if err := target.CheckNames("target", t); err != nil {
		e := stageerr.FromError(err)
		e.Stage = stageName
		return nil, e
	}
	name := t.GetProvider()
	p, ok := s.providers[name]
	switch {
	case name == "":
		return nil, invalid("target.provider must be set; configured providers: %s", s.providerList())
	case !ok:
		return nil, invalid("unknown provider %q in target.provider; configured providers: %s", name, s.providerList())
	case t.GetModel() == "":
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
