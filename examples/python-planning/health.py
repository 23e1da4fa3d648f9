"""The standard gRPC health service (grpc.health.v1.Health), which agentmesh's clients use.

The orchestrator's connections check the health of every stage they call (pkg/dial: client-side
health checking, a Watch of service ""), and Kubernetes probes and the conformance kit ask
Check, so a replacement stage serves it. The grpcio-health-checking package has one, but
Debian's python3-grpcio does not include it; this one is generated from
examples/proto/grpc_health/v1/health.proto.
"""

import threading

import grpc

from grpc_health.v1 import health_pb2, health_pb2_grpc

ServingStatus = health_pb2.HealthCheckResponse.ServingStatus


class Health(health_pb2_grpc.HealthServicer):
    """Reports the server ("") and the named services SERVING until shutdown()."""

    def __init__(self, services):
        self._changed = threading.Condition()
        self._statuses = {name: ServingStatus.Value("SERVING") for name in ("", *services)}

    def shutdown(self):
        """Reports every service NOT_SERVING, so that clients move away while the server drains."""
        with self._changed:
            for name in self._statuses:
                self._statuses[name] = ServingStatus.Value("NOT_SERVING")
            self._changed.notify_all()

    def Check(self, request, context):
        with self._changed:
            status = self._statuses.get(request.service)
        if status is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown service {request.service!r}")
        return health_pb2.HealthCheckResponse(status=status)

    def Watch(self, request, context):
        # Each Watch holds one of the server's worker threads while the client stays connected.
        context.add_callback(self._wake)
        last = None
        while context.is_active():
            with self._changed:
                status = self._statuses.get(request.service, ServingStatus.Value("SERVICE_UNKNOWN"))
                if status == last:
                    self._changed.wait()
                    continue
            last = status
            yield health_pb2.HealthCheckResponse(status=status)

    def _wake(self):
        with self._changed:
            self._changed.notify_all()
