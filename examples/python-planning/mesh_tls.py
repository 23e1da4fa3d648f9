"""Mutual TLS with the mesh's services, as the Go stages serve it (pkg/auth in the Go code).

In a mesh with mutual TLS between its services (tls.ca), every service has a certificate of the
mesh CA whose one URI name is its mesh identity, spiffe://agentmesh/<service>. A stage serves
TLS with its own certificate, so the orchestrator can check it is the stage it dialled; the
handshake refuses a caller without a certificate of the mesh CA; and every call but health is
answered only for a caller whose certificate names a mesh identity, PERMISSION_DENIED with a
StageError otherwise. The files are named by TLS_CA, TLS_CERT and TLS_KEY, as for the Go
binaries; with none of them set the stage serves plaintext.
"""

import os
import re

import grpc

from stage_status import Code, StageError

# ENV names the files of mutual TLS: the mesh CA, the stage's certificate and its key (PEM).
ENV = ("TLS_CA", "TLS_CERT", "TLS_KEY")

# MESH_ID is a mesh identity: the SPIFFE ID of a service of the mesh.
MESH_ID = re.compile(r"spiffe://agentmesh/[a-z0-9]([a-z0-9-]*[a-z0-9])?")


def server_credentials():
    """The server credentials of the files ENV names, or None when none is set (plaintext).

    Raises ValueError when only some are set or one cannot be read."""
    paths = {name: os.environ.get(name, "") for name in ENV}
    missing = [name for name, path in paths.items() if not path]
    if len(missing) == len(ENV):
        return None
    if missing:
        raise ValueError(f"mutual TLS needs {', '.join(ENV)}: {', '.join(missing)} not set")
    pem = {}
    for name, path in paths.items():
        try:
            with open(path, "rb") as f:
                pem[name] = f.read()
        except OSError as err:
            raise ValueError(f"{name}: {err}") from err
    return grpc.ssl_server_credentials(
        [(pem["TLS_KEY"], pem["TLS_CERT"])], root_certificates=pem["TLS_CA"], require_client_auth=True
    )


def check_caller(context):
    """Raises a PERMISSION_DENIED StageError unless the caller's certificate, which the handshake
    verified against the mesh CA, has one URI name and it is a mesh identity."""
    auth = context.auth_context()
    uris = auth.get("peer_uri", [])
    if len(uris) == 1 and MESH_ID.fullmatch(uris[0].decode()):
        return
    subject = b", ".join(auth.get("x509_subject", [])).decode()
    raise StageError(
        Code.STAGE_ERROR_CODE_PERMISSION_DENIED,
        f'stages take calls only from the services of the mesh: the certificate of "{subject}" '
        "names no mesh identity (a URI name spiffe://agentmesh/<service>)",
    )
