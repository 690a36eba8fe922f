"""One behavioural suite over three transports: gRPC streams, watched files, REST-JSON polling.

`Served` hides how a change reaches the client: over gRPC the control plane pushes it; for files
it rewrites each type's file (atomically, in a different format per type); over REST the client
polls the control plane's REST endpoint.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from xdsclient import Backoff, ClientOptions, FileSource, RestSource, XdsClient
from xdsclient.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE_CONFIGURATION
from xdsclient.testing import ControlPlane

TYPES = (LISTENER, ROUTE_CONFIGURATION, CLUSTER, ENDPOINT)
FILES = {
    LISTENER.type_url: "lds.yaml",
    ROUTE_CONFIGURATION.type_url: "rds.json",
    CLUSTER.type_url: "cds.pb",
    ENDPOINT.type_url: "eds.pb_text",
}
OPTIONS = ClientOptions(does_not_exist_timeout=2.0, backoff=Backoff(initial=0.05, maximum=0.2))


class Served:
    """A control plane and how its state reaches a client over one transport."""

    def __init__(self, kind: str, cp: ControlPlane, directory: Path) -> None:
        self.kind = kind
        self.cp = cp
        self.directory = directory
        self.rest_url = ""

    def set(self, *resources: Any) -> None:
        for resource in resources:
            self.cp.set(resource)
        self.sync()

    def remove(self, type_url: str, name: str) -> None:
        self.cp.remove(type_url, name)
        self.sync()

    def sync(self) -> None:
        """Files: write every type's file anew (the others see changes by themselves)."""
        if self.kind == "file":
            for rtype in TYPES:
                self.cp.write_file(self.directory / FILES[rtype.type_url], rtype.type_url)

    def client(self, **kw: Any) -> XdsClient:
        if self.kind == "grpc":
            return XdsClient(self.cp.address, node_id="n", options=OPTIONS, **kw)
        sources: dict[Any, FileSource | RestSource] = {}
        for rtype in TYPES:
            if self.kind == "file":
                sources[rtype] = FileSource(path=str(self.directory / FILES[rtype.type_url]))
            else:
                sources[rtype] = RestSource(url=self.rest_url, refresh_delay=0.05)
        return XdsClient(node_id="n", sources=sources, options=OPTIONS, **kw)


@pytest.fixture(params=["grpc", "file", "rest"])
async def served(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Served]:
    async with ControlPlane() as cp:
        result = Served(request.param, cp, tmp_path)
        if request.param == "rest":
            result.rest_url = (await cp.serve_rest()).url
        result.sync()
        yield result


async def break_source(served: Served) -> None:
    """Make the source unreachable: the server down, the files gone, the endpoint failing."""
    if served.kind == "grpc":
        await served.cp.stop(keep_port=True)  # `repair_source` starts it there again
    elif served.kind == "file":
        for name in FILES.values():
            (served.directory / name).unlink()
    else:
        endpoint = await served.cp.serve_rest()
        endpoint.fail_with = 503


async def repair_source(served: Served) -> None:
    if served.kind == "grpc":
        await served.cp.start()
    elif served.kind == "rest":
        (await served.cp.serve_rest()).fail_with = None
    served.sync()


def timeout_of(client: XdsClient, name: str = "c") -> int | None:
    """The connect timeout (seconds) of the cached cluster ``name``: which version is held."""
    state = client.resource_state(CLUSTER, name)
    if state is None or state.value is None:
        return None
    seconds: int = state.value.proto.connect_timeout.seconds
    return seconds
