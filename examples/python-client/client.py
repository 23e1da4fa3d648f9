"""A Python client of agentmesh's public API, agentmesh.agent.v1.AgentService.

    python3 client.py ADDRESS MESSAGE

runs MESSAGE as an agent run twice, with Run (one answer: the RunResult) and with StreamRun (the
run's events as they happen), then makes a bad request to show how an error's StageError detail
reads, and prints one JSON object of what it saw. AGENTMESH_API_KEY, when set, is sent as
"authorization: Bearer <key>"; AGENTMESH_CA, when set, names the PEM file of the CA that signed
the orchestrator's certificate, and the client speaks TLS. Like the agentmesh CLI, it sends a
key in clear text only to an address of this host: to another host it needs AGENTMESH_CA, or
AGENTMESH_INSECURE=1 to send the key in clear text all the same. Exit status 1 when a call fails
or the key would cross the network in clear text.
"""

import ipaddress
import json
import os
import sys

import grpc

from agentmesh.agent.v1 import agent_service_pb2, agent_service_pb2_grpc
from agentmesh.type.v1 import outcome_pb2, stage_error_pb2
from google.rpc import status_pb2

# TRAILER carries the rich status of a failed call: a serialised google.rpc.Status whose details
# hold the StageError (the grpcio-status package reads it too, where it is installed).
TRAILER = "grpc-status-details-bin"

# TIMEOUT_SECONDS bounds each call.
TIMEOUT_SECONDS = 60


def stage_error(rpc_error):
    """Returns the StageError detail of a failed call (a grpc.RpcError), or None without one."""
    for key, value in rpc_error.trailing_metadata() or ():
        if key != TRAILER:
            continue
        for detail in status_pb2.Status.FromString(value).details:
            err = stage_error_pb2.StageError()
            if detail.Unpack(err):
                return err
    return None


def channel(addr):
    """A channel to the orchestrator at addr: TLS with AGENTMESH_CA, plaintext otherwise."""
    ca = os.environ.get("AGENTMESH_CA")
    if not ca:
        return grpc.insecure_channel(addr)
    with open(ca, "rb") as f:
        return grpc.secure_channel(addr, grpc.ssl_channel_credentials(root_certificates=f.read()))


def local(addr):
    """Whether addr (host:port) is an address of this host: localhost, a loopback address, or
    every interface (an empty or unspecified host), as the agentmesh CLI counts them."""
    host = addr.rsplit(":", 1)[0].strip("[]")
    if host in ("", "localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_unspecified


def check_key_in_clear(addr, key):
    """Exits when key would go in clear text to addr, an address of another host, where anyone
    on the path would read it (a server that speaks TLS fails the call only after that)."""
    if key and not os.environ.get("AGENTMESH_CA") and os.environ.get("AGENTMESH_INSECURE") != "1" \
            and not local(addr):
        sys.exit(f"python client: AGENTMESH_API_KEY would cross the network to {addr} in clear "
                 "text: set AGENTMESH_CA to the CA of the orchestrator's certificate, to speak "
                 "TLS (or AGENTMESH_INSECURE=1 to send it in clear text all the same)")


def main(addr, message):
    key = os.environ.get("AGENTMESH_API_KEY")
    check_key_in_clear(addr, key)
    metadata = (("authorization", f"Bearer {key}"),) if key else ()
    with channel(addr) as ch:
        agent = agent_service_pb2_grpc.AgentServiceStub(ch)
        # With an API key the run is the key's principal's: a user_id naming anyone else is
        # refused (PERMISSION_DENIED) unless the key is an admin's.
        request = agent_service_pb2.RunRequest(user_id="" if key else "python-client", message=message)
        try:
            result = agent.Run(request, timeout=TIMEOUT_SECONDS, metadata=metadata)
            events = []
            for ev in agent.StreamRun(request, timeout=TIMEOUT_SECONDS, metadata=metadata):
                kind = ev.WhichOneof("kind")
                seen = {"seq": ev.seq, "kind": kind}
                if kind == "plan_created":
                    seen["steps"] = [{"id": s.id, "description": s.description, "tool": s.tool_name}
                                     for s in ev.plan_created.steps]
                events.append(seen)
        except grpc.RpcError as err:
            detail = stage_error(err)
            code = stage_error_pb2.StageErrorCode.Name(detail.code) if detail else "-"
            sys.exit(f"python client: {err.code().name} ({code}): {err.details()}")

        try:
            agent.GetRun(agent_service_pb2.GetRunRequest(run_id=""), timeout=TIMEOUT_SECONDS, metadata=metadata)
            invalid = None
        except grpc.RpcError as err:
            detail = stage_error(err)
            invalid = {
                "code": err.code().name,
                "message": err.details(),
                "stage_error": stage_error_pb2.StageErrorCode.Name(detail.code) if detail else None,
            }

    print(json.dumps({
        "run_id": result.run_id,
        "outcome": outcome_pb2.Outcome.Name(result.outcome),
        "exit_reason": result.exit_reason,
        "answer": result.final_report.content,
        "events": events,
        "invalid": invalid,
    }, indent=2))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python3 client.py ADDRESS MESSAGE")
    main(sys.argv[1], sys.argv[2])
