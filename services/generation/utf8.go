package generation

import (
	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	"github.com/agentmesh/agentmesh/pkg/validutf8"
)

// validAnswer replaces the bytes of a provider's answer that are not UTF-8 with U+FFFD.
// Protobuf's strings must be UTF-8: over gRPC such an answer could not be sent (the run failed
// as if its provider had, with a failure of no class), and with the stages in process the run's
// checkpoint could not be stored (the run waited for the store until its deadline). The
// configured providers decode JSON, which replaces such bytes itself; a Provider of Go code
// (Options.Providers) need not.
func validAnswer(raw *Response) {
	for _, s := range []*string{&raw.Model, &raw.Content, &raw.Reasoning, &raw.FinishReason} {
		validText(s)
	}
	for i := range raw.ToolCalls {
		c := &raw.ToolCalls[i]
		validText(&c.ID)
		validText(&c.Name)
		validText(&c.Arguments)
	}
}

// validDelta is validAnswer for one fragment of a streamed answer. A fragment that splits a
// character shows it as U+FFFD; the answer, which the provider assembles, keeps it whole.
func validDelta(d *generationv1.Delta) {
	validText(&d.Content)
	validText(&d.Reasoning)
	if c := d.GetToolCall(); c != nil {
		validText(&c.Id)
		validText(&c.Name)
		validText(&c.Arguments)
	}
}

// validText replaces the bytes of *s that are not UTF-8 with U+FFFD.
func validText(s *string) { *s, _ = validutf8.String(*s) }
