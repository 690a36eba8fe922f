"""grpcio's C-core xDS client and its CSDS service, in a subprocess, against our control plane.

Why a subprocess: C-core reads its bootstrap from the environment once per process. The child
opens a channel to each target, serves CSDS (`grpc_csds`) on a free port, prints the port, and
runs until its stdin closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
from envoy.service.status.v3 import csds_pb2, csds_pb2_grpc

from tests.children import stop_child

_CHILD = r"""
import json, sys, grpc, grpc_csds
from concurrent import futures
server = grpc.server(futures.ThreadPoolExecutor(2))
grpc_csds.add_csds_servicer(server)
port = server.add_insecure_port("127.0.0.1:0")
server.start()
options = list(json.loads(sys.argv[1]).items())
channels = [grpc.insecure_channel(target, options=options) for target in sys.argv[2:]]
for channel in channels:
    grpc.channel_ready_future(channel)
print(port, flush=True)
sys.stdin.read()
"""


@contextlib.asynccontextmanager
async def grpc_client(
    server: str,
    node_id: str,
    targets: Sequence[str],
    *,
    server_features: Sequence[str] = (),
    does_not_exist_timeout: float | None = None,
    data_error_handling: bool = False,
) -> AsyncIterator[Any]:
    """Yields a function returning C-core's `ClientStatusResponse` now. ``server_features`` go
    in the bootstrap beside ``xds_v3``; ``does_not_exist_timeout`` sets C-core's resource timer
    (its channel argument ``grpc.xds_resource_does_not_exist_timeout_ms``);
    ``data_error_handling`` turns on C-core's gRFC A88 behaviour (an experiment there)."""
    bootstrap = {
        "xds_servers": [
            {
                "server_uri": server,
                "channel_creds": [{"type": "insecure"}],
                "server_features": ["xds_v3", *server_features],
            }
        ],
        "node": {"id": node_id},
    }
    options = {}
    if does_not_exist_timeout is not None:
        options["grpc.xds_resource_does_not_exist_timeout_ms"] = int(does_not_exist_timeout * 1000)
    env = {**os.environ, "GRPC_VERBOSITY": "NONE"}
    if data_error_handling:
        env["GRPC_EXPERIMENTAL_XDS_DATA_ERROR_HANDLING"] = "true"
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "bootstrap.json")
        with open(path, "w") as file:
            json.dump(bootstrap, file)
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _CHILD, json.dumps(options), *targets,
            env={**env, "GRPC_XDS_BOOTSTRAP": path},
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert process.stdin is not None
        assert process.stdout is not None
        try:
            port = int(await asyncio.wait_for(process.stdout.readline(), 30))
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = csds_pb2_grpc.ClientStatusDiscoveryServiceStub(channel)

                async def fetch() -> Any:
                    return await stub.FetchClientStatus(csds_pb2.ClientStatusRequest())

                yield fetch
        finally:
            await stop_child(process, grace=0)
