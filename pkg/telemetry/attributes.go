package telemetry

import "go.opentelemetry.io/otel/attribute"

// Span attributes of agentmesh beyond the OpenTelemetry semantic conventions, in the
// "agentmesh." namespace with dotted names like the conventions' own (README, "Tracing").
const (
	// RunIDKey ties a span to its run: the run's id, on the run's root span, its state spans,
	// the chat, execute_tool and event publish spans.
	RunIDKey = attribute.Key("agentmesh.run.id")
	// StepIDKey is the transcript step of a state span, e.g. "turn-2/ACT".
	StepIDKey = attribute.Key("agentmesh.step.id")
)
