package events

import (
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
)

// HeaderCarrier adapts NATS message headers to OpenTelemetry's TextMapCarrier, so a
// propagator can inject trace context into a message and extract it again.
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier(nil)

// Get returns the first value of key; an exact match wins, otherwise the match ignores case
// (NATS headers are case-sensitive, other publishers may capitalise).
func (c HeaderCarrier) Get(key string) string {
	if v := nats.Header(c).Get(key); v != "" {
		return v
	}
	for k, vs := range c {
		if len(vs) > 0 && strings.EqualFold(k, key) {
			return vs[0]
		}
	}
	return ""
}

// Set replaces the values of key with value.
func (c HeaderCarrier) Set(key, value string) {
	nats.Header(c).Set(key, value)
}

// Keys returns the header names.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
