package telemetry

import (
	"context"
	"os"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// newResource returns the resource of a service's spans: service.instance.id (InstanceID),
// then the SDK's attributes (telemetry.sdk.*), then those of OTEL_RESOURCE_ATTRIBUTES, which
// win over the former, then service.name. A malformed OTEL_RESOURCE_ATTRIBUTES is reported to
// the OpenTelemetry error handler, as the SDK does, and the rest of the resource kept. The
// variable is read on every call (the SDK's resource.Default reads it once per process).
func newResource(service string) *resource.Resource {
	res, err := resource.New(context.Background(),
		resource.WithAttributes(semconv.ServiceInstanceID(InstanceID())),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
		resource.WithAttributes(semconv.ServiceName(service)),
	)
	if err != nil {
		otel.Handle(err)
	}
	return res
}

// InstanceID names this process among the replicas of its service, for the service.instance.id
// of its spans: AGENTMESH_REPLICA when set (the orchestrator's replica name), else the host
// name and the process id, "<host>-<pid>" (in Kubernetes the host name is the pod's name).
func InstanceID() string {
	if id := os.Getenv("AGENTMESH_REPLICA"); id != "" {
		return id
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + "-" + strconv.Itoa(os.Getpid())
}
