"""`XdsSyncTransport` end to end: ``httpx.Client`` from plain threads, the test control plane
and real HTTP backends on 127.0.0.1 (both on a loop thread of their own): requests are routed by
xDS, local answers come back as they are, and the body streams."""

from __future__ import annotations

import concurrent.futures
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.sync.conftest import Plane, plane  # noqa: F401  # the control plane fixture
from xdsclient import ClientOptions
from xdsclient.httpx import ERROR_HEADER
from xdsclient.httpx._sync import XdsSyncTransport
from xdsclient.resources import CLUSTER
from xdsclient.sync import SyncXdsClient
from xdsclient.testing import HttpBackend, bootstrap

from .backends import streaming_backend
from .resources import LISTENER, cluster_of, resources, route_config, to, vhost

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def two(plane: Plane) -> Iterator[list[HttpBackend]]:  # noqa: F811
    """Backends ``a`` and ``b``, served on the control plane's loop thread."""
    started = [HttpBackend("a"), HttpBackend("b")]
    for backend in started:
        plane.thread.run(backend.start())
    try:
        yield started
    finally:
        for backend in started:
            plane.thread.run(backend.stop())


@pytest.fixture
def xds(plane: Plane) -> Iterator[SyncXdsClient]:  # noqa: F811
    options = ClientOptions(does_not_exist_timeout=1.0)
    with SyncXdsClient(plane.address, node_id="sync-transport", options=options) as client:
        yield client


def answer(response: httpx.Response) -> str:
    """``<backend> <path>``: who answered a request, and the path it got."""
    body = response.json()
    return f"{body['backend']} {body['path']}"


def test_thirty_two_threads_send_through_one_transport_routed_by_xds(
    plane: Plane,  # noqa: F811
    xds: SyncXdsClient,
    two: list[HttpBackend],
) -> None:
    """Each thread's requests reach the backend their route names, counted at the backends;
    the transport runs on the shared client's loop thread."""
    a, b = two
    routes = route_config(vhost("reviews", ["reviews.svc"], to("b", "/api/"), to("a")))
    plane.set(*resources(routes, cluster_of("a", [a]), cluster_of("b", [b])))
    barrier = threading.Barrier(32)
    transport = XdsSyncTransport(LISTENER, client=xds)
    assert transport.loop_thread is xds.loop_thread
    with httpx.Client(transport=transport) as http:

        def work(i: int) -> list[str]:
            barrier.wait(10)
            return [
                answer(http.get(f"http://reviews.svc/{where}/{i}"))
                for where in ("api", "web")
                for _ in range(5)
            ]

        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            results = list(pool.map(work, range(32)))
    assert results == [[f"b /api/{i}"] * 5 + [f"a /web/{i}"] * 5 for i in range(32)]
    assert (a.total, b.total) == (160, 160)
    assert xds.get(CLUSTER, "a").name == "a"  # the shared client is still open


def test_local_answers_come_back_as_xds_transport_gives_them(
    plane: Plane,  # noqa: F811
    xds: SyncXdsClient,
    two: list[HttpBackend],
) -> None:
    """A host no virtual host serves is a 404 with the reason in its header, as async."""
    a, _ = two
    plane.set(*resources(route_config(vhost("only", ["only.svc"], to("a"))), cluster_of("a", [a])))
    with httpx.Client(transport=XdsSyncTransport(LISTENER, client=xds)) as http:
        assert answer(http.get("http://only.svc/x")) == "a /x"
        r = http.get("http://elsewhere.svc/x")
    assert r.status_code == 404
    assert "no virtual host matches the authority elsewhere.svc" in r.headers[ERROR_HEADER]
    assert a.total == 1


def test_a_body_streams_through_xds_before_its_end(plane: Plane, xds: SyncXdsClient) -> None:  # noqa: F811
    """The first chunk reaches the sync reader while the backend still holds the second."""
    backend_context = streaming_backend()
    backend = plane.thread.run(backend_context.__aenter__())
    try:
        plane.set(*resources(route_config(vhost("v", ["*"], to("s"))), cluster_of("s", [backend])))
        with (
            httpx.Client(transport=XdsSyncTransport(LISTENER, client=xds)) as http,
            http.stream("GET", "http://svc/") as response,
        ):
            chunks = response.iter_raw()
            assert next(chunks) == b"first"
            plane.thread.call(backend.gate.set)
            assert b"".join(chunks) == b"second"
    finally:
        plane.thread.run(backend_context.__aexit__(None, None, None))


def test_without_a_client_it_reads_the_bootstrap_and_stops_its_own_loop(
    plane: Plane,  # noqa: F811
    two: list[HttpBackend],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No client: the transport makes one from the bootstrap on a loop thread of its own, and
    closing the httpx client closes that client and joins that thread."""
    a, _ = two
    plane.set(*resources(route_config(vhost("v", ["*"], to("a"))), cluster_of("a", [a])))
    config = bootstrap([plane.address], node_id="from-env")
    monkeypatch.setenv("GRPC_XDS_BOOTSTRAP_CONFIG", json.dumps(config))
    transport = XdsSyncTransport(LISTENER)
    async_transport: Any = transport._transport
    with httpx.Client(transport=transport) as http:
        assert answer(http.get("http://svc/env")) == "a /env"
    assert async_transport.client.config.node.id == "from-env"
    assert async_transport.client.closed
    thread = transport.loop_thread._thread
    assert thread is not None
    assert not thread.is_alive()
