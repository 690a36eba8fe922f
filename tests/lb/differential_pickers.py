"""grpcio's C-core xDS client against our pickers: same control plane, same resources, real
backends that say who they are.

Why a subprocess: C-core reads its bootstrap from the environment once per process. The child
opens ``xds:///<listener>``, makes one wait-for-ready RPC per line of headers it is given, and
prints the port of the backend that answered each. Our side decodes the very messages the
control plane serves with our views and picks with our blocks; a test compares the two.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import grpc

from xdsclient.testing import ControlPlane

METHOD = "/lbtest.Who/Am"

_CHILD = r"""
import json, sys, grpc
channel = grpc.insecure_channel("xds:///" + sys.argv[1])
call = channel.unary_unary(sys.argv[2])
out = []
for headers in json.loads(sys.stdin.read()):
    reply = call(b"", metadata=list(headers.items()), wait_for_ready=True, timeout=20)
    out.append(int(reply))
print(json.dumps(out), flush=True)
"""


class _Who(grpc.GenericRpcHandler):
    """Answers every RPC of `METHOD` with its own port."""

    def __init__(self) -> None:
        self.port = 0

    def service(self, handler_call_details: Any) -> Any:
        if handler_call_details.method != METHOD:
            return None

        async def answer(request: bytes, context: Any) -> bytes:
            return str(self.port).encode()

        return grpc.unary_unary_rpc_method_handler(answer)


@contextlib.asynccontextmanager
async def backends(count: int) -> AsyncIterator[list[int]]:
    """``count`` grpc.aio servers on 127.0.0.1 answering with their port; yields the ports."""
    servers = []
    ports = []
    try:
        for _ in range(count):
            handler = _Who()
            server = grpc.aio.server()
            server.add_generic_rpc_handlers([handler])
            handler.port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            servers.append(server)
            ports.append(handler.port)
        yield ports
    finally:
        for server in servers:
            await server.stop(None)


async def grpc_picks(
    resources: Sequence[Any],
    listener: str,
    calls: Sequence[Mapping[str, str]],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
) -> list[int]:
    """The backend port C-core sends each call to (``calls``: each call's headers), with
    ``resources`` served by a fresh control plane."""
    async with ControlPlane() as plane:
        plane.set_all(resources)
        bootstrap = {
            "xds_servers": [
                {
                    "server_uri": plane.address,
                    "channel_creds": [{"type": "insecure"}],
                    "server_features": ["xds_v3"],
                }
            ],
            "node": {"id": "lb-pickers"},
        }
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "bootstrap.json")
            with open(path, "w") as file:
                json.dump(bootstrap, file)
            child_env = {
                **os.environ,
                "GRPC_VERBOSITY": "NONE",
                "GRPC_XDS_BOOTSTRAP": path,
                **(env or {}),
            }
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-c", _CHILD, listener, METHOD,
                env=child_env,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            try:
                out, _ = await asyncio.wait_for(
                    process.communicate(json.dumps(list(map(dict, calls))).encode()), timeout
                )
            finally:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
    picks: list[int] = json.loads(out)
    return picks
