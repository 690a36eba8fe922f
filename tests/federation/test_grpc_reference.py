"""The listener names gRPC itself requests (grpcio, i.e. gRPC C-core) are the ones this client
requests, byte for byte (gRFC A47): both are pointed at control planes with one bootstrap and
given the same targets, and the names each control plane was asked for are compared."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests.builders import listener, routes
from tests.children import stop_child
from tests.federation.test_spellings import AUTHORITIES as SPELLING_AUTHORITIES
from tests.federation.test_spellings import SPELLINGS
from xdsclient import XdsClient
from xdsclient.resources import CLUSTER, LISTENER
from xdsclient.testing import ControlPlane, bootstrap

LDS_TYPE = "envoy.config.listener.v3.Listener"
_ALL = "".join(chr(c) for c in range(0x20, 0x7F)) + "\u00e9"

#: Opens a channel to each target in argv and keeps them connecting until it is killed.
_GRPC_CHILD = """
import sys, time, grpc
channels = [grpc.insecure_channel(target) for target in sys.argv[1:]]
futures = [grpc.channel_ready_future(channel) for channel in channels]
time.sleep(30)
"""

TARGETS = [
    "xds:///shard=1&tier=gold",
    "xds://b.example/svc=v1",
    "xds://b.example/" + urllib.parse.quote(_ALL, safe=""),
    "xds://c.example/svc",
    "xds://a:b%40c/svc",
    "xds://%5Bv6%5D/svc",
]


def _bootstrap(plane: ControlPlane) -> dict[str, Any]:
    template = f"/{LDS_TYPE}/x/%s?z=1&a=%41&k=v1&k=v2&q=a/b?c:d@e!$(*)+,;&sp=a%20b&amp=a%26b"
    config = bootstrap(
        [plane], client_default_listener_resource_name_template=f"xdstp:///{LDS_TYPE}/%s"
    )
    config["authorities"] = {
        "": {},
        "b.example": {},
        "c.example": {"client_listener_resource_name_template": f"xdstp://c.example{template}"},
        "a:b@c": {},
        "[v6]": {},
    }
    return config


async def _names(plane: ControlPlane, count: int, type_url: str = LISTENER.type_url) -> set[str]:
    """The distinct names of a type ``plane`` was asked for, once there are ``count``."""

    def names() -> set[str]:
        return {n for r in plane.requests if r.type_url == type_url for n in _asked(r.message)}

    with contextlib.suppress(TimeoutError):
        await plane.wait_for_request(lambda r: len(names()) >= count, timeout=4.0)
    return names()


def _asked(message: Any) -> list[str]:
    return list(getattr(message, "resource_names", None) or message.resource_names_subscribe)


@contextlib.asynccontextmanager
async def _grpc_channels(
    config: dict[str, Any], tmp_path: Path, targets: list[str] = TARGETS
) -> AsyncIterator[None]:
    path = tmp_path / "bootstrap.json"
    path.write_text(json.dumps(config))
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _GRPC_CHILD,
        *targets,
        env={**os.environ, "GRPC_XDS_BOOTSTRAP": str(path)},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        await stop_child(child, grace=0)


async def test_listener_names_are_the_ones_grpc_c_core_requests(tmp_path: Path) -> None:
    """Every target's listener name goes on the wire exactly as grpcio sends it."""
    async with ControlPlane() as for_grpc, ControlPlane() as for_us:
        async with _grpc_channels(_bootstrap(for_grpc), tmp_path):
            grpc_names = await _names(for_grpc, len(TARGETS))
        async with XdsClient(bootstrap=_bootstrap(for_us)) as client:
            watches = [client.watch_config(target) for target in TARGETS]
            our_names = await _names(for_us, len(TARGETS))
            for watch in watches:
                watch.cancel()
    assert len(grpc_names) == len(TARGETS), grpc_names  # grpcio asked for every one
    assert sorted(our_names) == sorted(grpc_names)


def _spelled_routes(plane: ControlPlane) -> set[str]:
    """Serve listener ``svc`` whose routes name a cluster under every spelling of
    test_spellings.py (the one watched and the one served); the names C-core requests for
    them (the expected wire form of each)."""
    spellings = [case.values for case in SPELLINGS]
    plane.set(listener("svc"))
    plane.set(
        routes(*(str(name) for watched, served, _ in spellings for name in (watched, served)))
    )
    return {str(wire) for _, _, wire in spellings}


async def test_cluster_names_of_every_spelling_are_the_ones_grpc_c_core_requests(
    tmp_path: Path,
) -> None:
    """A route naming clusters in every spelling the names module normalises: grpcio asks for
    the names this client asks for, one per resource, which are test_spellings.py's wire forms."""
    authorities: dict[str, list[ControlPlane]] = {name: [] for name in SPELLING_AUTHORITIES}
    async with ControlPlane() as for_grpc, ControlPlane() as for_us:
        expected = _spelled_routes(for_grpc)
        _spelled_routes(for_us)
        config = bootstrap([for_grpc], authorities=authorities)
        async with _grpc_channels(config, tmp_path, ["xds:///svc"]):
            grpc_names = await _names(for_grpc, len(expected), CLUSTER.type_url)
        config = bootstrap([for_us], authorities=authorities)
        async with XdsClient(bootstrap=config) as client:
            watch = client.watch_config("svc")
            our_names = await _names(for_us, len(expected), CLUSTER.type_url)
            watch.cancel()
    assert grpc_names == expected
    assert our_names == expected
