"""A planning stage for agentmesh in Python: agentmesh.planning.v1.PlanningService and the gRPC
health service, on LISTEN_ADDR (default 127.0.0.1:7002, the Go planning stage's): plaintext, or
mutual TLS with the mesh's services when TLS_CA, TLS_CERT and TLS_KEY name its files (mesh_tls.py).

Start the mesh with PLANNING_ADDR pointing at it, and every run's plan comes from planner.py.
Failures carry the StageError detail the orchestrator reads (stage_status.py). SIGTERM or
SIGINT reports NOT_SERVING, then drains the RPCs in flight for up to five seconds.
"""

import logging
import os
import signal
import sys
import threading
from concurrent import futures

import grpc

import mesh_tls
import planner
from agentmesh.planning.v1 import planning_service_pb2, planning_service_pb2_grpc
from grpc_health.v1 import health_pb2_grpc
from health import Health
from stage_status import Code, StageError, abort

# STAGE names this stage in its StageError details.
STAGE = "planning"

# MAX_MESSAGE_BYTES is the largest message taken or sent, the Go services' default.
MAX_MESSAGE_BYTES = 32 << 20

# DRAIN_SECONDS bounds how long a stopping server waits for the RPCs in flight.
DRAIN_SECONDS = 5

# SERVER_OPTIONS are the Go services' (pkg/server): messages of up to MAX_MESSAGE_BYTES; the
# mesh's clients may ping every 10 s, also between calls (gRPC's C core otherwise allows one ping
# in 5 minutes without data and closes the connection of a client that pings more, "too many
# pings", which the orchestrator's keepalive of 30 s would trip); idle clients are pinged every
# minute, and connections age out after 5 minutes so that clients re-resolve and spread over
# new replicas.
SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.max_connection_age_ms", 5 * 60_000),
]

log = logging.getLogger("python-planning")


class PlanningStage(planning_service_pb2_grpc.PlanningServiceServicer):
    """PlanningService by planner.plan, its failures sent as stage errors. With mutual_tls it
    answers only the mesh's services (mesh_tls.check_caller)."""

    def __init__(self, mutual_tls):
        self.mutual_tls = mutual_tls

    def Plan(self, request, context):
        try:
            if self.mutual_tls:
                mesh_tls.check_caller(context)
            resp = planner.plan(request)
        except StageError as err:
            err.stage = STAGE
            log.info("plan refused: %s %s", Code.Name(err.code), err.message)
            abort(context, err)
        except Exception as err:  # a bug here: INTERNAL, as the Go stages answer one
            log.exception("planning failed")
            abort(context, StageError(Code.STAGE_ERROR_CODE_UNSPECIFIED, f"planning failed: {err}", STAGE))
        log.info("plan made for run %s: %d steps", request.run_id or "-", len(resp.steps))
        return resp


def serve(addr):
    """Serves until SIGTERM or SIGINT, then drains."""
    try:
        credentials = mesh_tls.server_credentials()
    except ValueError as err:
        sys.exit(f"python-planning: {err}")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32), options=SERVER_OPTIONS)
    planning_service_pb2_grpc.add_PlanningServiceServicer_to_server(PlanningStage(credentials is not None), server)
    service_name = planning_service_pb2.DESCRIPTOR.services_by_name["PlanningService"].full_name
    health = Health([service_name, STAGE])
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    if credentials is None:
        port = server.add_insecure_port(addr)
    else:
        port = server.add_secure_port(addr, credentials)
    if port == 0:
        sys.exit(f"python-planning: cannot listen on {addr}")
    server.start()
    log.info("serving %s on %s (%s)", service_name, addr, "plaintext" if credentials is None else "mutual TLS")

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    log.info("shutting down")
    health.shutdown()
    server.stop(DRAIN_SECONDS).wait()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    serve(os.environ.get("LISTEN_ADDR", "127.0.0.1:7002"))
