"""`HttpConnections`: one httpcore pool per endpoint and TLS policy, against real hypercorn
backends on 127.0.0.1: requests, HTTP/2, the pool's life, and the connectivity it reports."""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpcore
import httpx
import pytest

from tests.helpers import eventually
from xdsclient import ProtocolError
from xdsclient.httpx._connections import HttpConnection, HttpConnections
from xdsclient.httpx._connectivity import (
    TRANSITIONS,
    Backoff,
    ConnectEvent,
    EndpointConnectivity,
)
from xdsclient.lb import ConnectivityState
from xdsclient.testing import Behaviour, FakeClock, HttpBackend, http_backends

pytestmark = pytest.mark.timeout(20)

IDLE = ConnectivityState.IDLE
CONNECTING = ConnectivityState.CONNECTING
READY = ConnectivityState.READY
FAILURE = ConnectivityState.TRANSIENT_FAILURE


class Counting(httpcore.AnyIOBackend):
    """httpcore's network backend, counting the TCP connects made through it."""

    def __init__(self) -> None:
        self.connects = 0

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        self.connects += 1
        return await super().connect_tcp(*args, **kwargs)


class Harness:
    """Connections built for a test, the states they reported, closed at the end."""

    def __init__(self) -> None:
        self.states: list[tuple[tuple[str, int], ConnectivityState]] = []
        self.network = Counting()
        self._made: list[HttpConnections] = []

    def __call__(self, **kwargs: Any) -> HttpConnections:
        kwargs.setdefault("network", lambda: self.network)
        connections = HttpConnections(lambda k, s: self.states.append((k, s)), **kwargs)
        self._made.append(connections)
        return connections

    def of(self, key: tuple[str, int]) -> list[ConnectivityState]:
        return [state for k, state in self.states if k == key]

    async def close(self) -> None:
        for connections in self._made:
            await connections.close()


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    made = Harness()
    try:
        yield made
    finally:
        await made.close()


@pytest.fixture
async def backend() -> AsyncIterator[HttpBackend]:
    async with http_backends(1) as (one,):
        yield one


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def get(
    connection: HttpConnection, url: str = "http://svc.test/", timeout: float | None = 5, **kw: Any
) -> httpx.Response:
    response = await connection.send(httpx.Request("GET", url, **kw), timeout)
    await response.aread()
    return response


async def settle() -> None:
    """Let every ready task run (no timer is involved)."""
    for _ in range(20):
        await asyncio.sleep(0)


# --- requests ---


async def test_a_request_goes_to_the_endpoint_with_its_path_query_headers_and_host(
    harness: Harness, backend: HttpBackend
) -> None:
    """The connection sends to its endpoint whatever host the URL names: the backend sees the
    path with its query, the request's headers and its Host, and answers with its name."""
    connection = harness().connect(backend.address)
    response = await get(connection, "http://reviews.svc/api/v1?x=1", headers={"x-user": "42"})
    assert response.status_code == 200
    assert response.headers["x-backend"] == "b0"
    (seen,) = backend.requests
    assert seen.path == "/api/v1?x=1"
    assert seen.header("host") == "reviews.svc"
    assert seen.header("x-user") == "42"
    assert response.json()["http_version"] == "1.1"


async def test_http2_in_plaintext_is_spoken_with_prior_knowledge_when_http1_is_off(
    harness: Harness, backend: HttpBackend
) -> None:
    """With HTTP/1.1 off and HTTP/2 on, a plaintext endpoint is spoken to in HTTP/2 (h2c
    prior knowledge); by default in HTTP/1.1."""
    h2 = harness(http1=False, http2=True).connect(backend.address)
    assert (await get(h2)).http_version == "HTTP/2"
    h1 = harness().connect(backend.address)
    assert (await get(h1)).http_version == "HTTP/1.1"
    assert [seen.http_version for seen in backend.requests] == ["2", "1.1"]


async def test_a_closed_connection_refuses_to_send(harness: Harness, backend: HttpBackend) -> None:
    """A connection closed by its owner (unheld, its request ended) raises ConnectError on a
    later send instead of opening connections nobody owns; `connect` gives a new one."""
    connections = harness()
    connection = connections.connect(backend.address)
    await get(connection)
    assert connection.closed
    with pytest.raises(httpx.ConnectError, match="is closed"):
        await get(connection)
    assert (await get(connections.connect(backend.address))).status_code == 200


async def test_a_reset_before_any_response_is_a_remote_protocol_error_not_a_connect_failure(
    harness: Harness, backend: HttpBackend
) -> None:
    """A backend that resets the connection instead of answering gives httpx's
    RemoteProtocolError; the endpoint stays READY (its connect succeeded)."""
    backend.script("/reset", Behaviour(reset=True))
    connections = harness()
    connections.hold_only([backend.address])
    connection = connections.connect(backend.address)
    with pytest.raises(httpx.RemoteProtocolError):
        await get(connection, "http://svc.test/reset")
    assert connections.state_of(backend.address) is READY
    assert (await get(connection)).status_code == 200


async def test_the_timeout_given_caps_the_requests_timeouts(
    harness: Harness, backend: HttpBackend
) -> None:
    """A backend slower than the attempt's timeout gives httpx's ReadTimeout after about that
    timeout, though the request's own timeouts are longer."""
    backend.script("/slow", Behaviour(delay=3))
    connection = harness().connect(backend.address)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(httpx.ReadTimeout):
        await get(connection, "http://svc.test/slow", timeout=0.2, extensions={"timeout": {}})
    assert loop.time() - started < 2


async def test_the_pool_limits_are_the_ones_given(harness: Harness, backend: HttpBackend) -> None:
    """With one connection at most, a second request waits for the pool and times out there
    (PoolTimeout) while the first is slow."""
    backend.script("/slow", Behaviour(delay=1))
    limits = httpx.Limits(max_connections=1)
    connection = harness(limits=limits).connect(backend.address)
    first = asyncio.ensure_future(get(connection, "http://svc.test/slow"))
    await eventually(lambda: backend.counts["/slow"] == 1)
    with pytest.raises(httpx.PoolTimeout):
        await get(connection, timeout=0.2)
    assert (await first).status_code == 200


# --- the pool's life ---


async def test_a_pool_unheld_closes_once_its_requests_have_ended(
    harness: Harness, backend: HttpBackend
) -> None:
    """A pool the snapshot no longer holds stays open while a response is unread, and closes
    (its connections too) as soon as that response is closed; a held one stays."""
    connections = harness()
    connections.hold_only([backend.address])
    connection = connections.connect(backend.address)
    response = await connection.send(httpx.Request("GET", "http://svc.test/"), 5)
    connections.hold_only([])
    assert backend.address in connections
    await response.aread()
    assert backend.address not in connections
    await eventually(lambda: not connection.pool.connections)
    held = connections.connect(backend.address)
    connections.hold_only([backend.address])
    await get(held)
    assert backend.address in connections


async def test_an_unheld_pool_without_requests_closes_at_once_and_slots_hold_one_policy(
    harness: Harness, backend: HttpBackend
) -> None:
    """Holding an endpoint holds its pools under every policy; holding a slot holds that
    pool only; a pool held by neither and without requests closes when the hold changes."""
    from xdsclient._plane._tls_policy import TlsPolicy

    connections = harness()
    plain = connections.connect(backend.address)
    secure = connections.connect(backend.address, TlsPolicy(ca_instance="roots"))
    assert len(connections) == 2
    connections.hold_only([backend.address])
    assert len(connections) == 2
    connections.hold_only([(backend.address, None)])
    assert len(connections) == 1
    assert connections.connect(backend.address) is plain
    connections.hold_only([])
    assert len(connections) == 0
    assert secure is not plain


# --- connectivity ---


async def test_asking_for_an_endpoint_connects_ahead_and_the_first_request_takes_that_connection(
    harness: Harness, backend: HttpBackend
) -> None:
    """A new pool is IDLE; asked for, it reports CONNECTING then READY, and the request that
    follows uses the connection opened ahead (one TCP connect in all)."""
    connections = harness()
    connections.hold_only([backend.address])
    connection = connections.connect(backend.address)
    assert connection.state is IDLE
    assert harness.of(backend.address) == []  # never from inside connect()
    await eventually(lambda: connection.state is READY)
    assert harness.of(backend.address) == [CONNECTING, READY]
    await get(connection)
    await get(connection)
    assert harness.network.connects == 1
    assert harness.of(backend.address) == [CONNECTING, READY]


async def test_a_request_waiting_for_the_connect_made_ahead_takes_its_failure(
    harness: Harness,
) -> None:
    """A request sent while the connect made ahead runs waits for it and, when it fails,
    fails with it (ConnectError) instead of connecting a second time."""
    key = ("127.0.0.1", free_port())
    connections = harness(clock=FakeClock())
    connections.hold_only([key])
    with pytest.raises(httpx.ConnectError):
        await get(connections.connect(key))
    assert harness.network.connects == 1
    assert harness.of(key) == [CONNECTING, FAILURE]


async def test_a_request_waits_for_the_connect_made_ahead_no_longer_than_its_connect_timeout(
    harness: Harness,
) -> None:
    """A connect made ahead that hangs (a listener that never answers the TLS handshake) is
    waited for only as long as the request's own connect timeout: ConnectTimeout."""
    from xdsclient._plane._tls_policy import TlsPolicy
    from xdsclient.httpx._tls import TlsContexts, cluster_security

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        key = silent.getsockname()
        tls = TlsContexts(cluster_security({}).store)
        connections = harness(clock=FakeClock(), tls=tls, timeout=httpx.Timeout(30))
        connections.hold_only([key])
        connection = connections.connect(key, TlsPolicy(system_roots=True))
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(httpx.ConnectTimeout):
            await get(connection, "https://svc.test/", timeout=0.3)
        assert loop.time() - started < 2


async def test_a_parked_connection_the_server_closed_is_replaced(harness: Harness) -> None:
    """A connection opened ahead that the server closed before any request is dropped and a
    new one made: the request succeeds on the restarted backend."""
    async with http_backends(1) as (backend,):
        connections = harness()
        connections.hold_only([backend.address])
        connection = connections.connect(backend.address)
        await eventually(lambda: connection.state is READY)
        await backend.stop(keep_port=True)
        await backend.start()
        assert (await get(connection)).status_code == 200
        assert harness.network.connects == 2


async def test_a_refused_connect_is_transient_failure_then_idle_once_the_backoff_has_passed(
    harness: Harness,
) -> None:
    """An endpoint nothing listens on goes CONNECTING then TRANSIENT_FAILURE; nothing more
    happens before gRPC's first backoff (1 s +-20 %) has passed on the clock; then it is IDLE and,
    still held, tried again: a second failure waits 1.6 s +-20 %."""
    clock = FakeClock()
    key = ("127.0.0.1", free_port())
    connections = harness(clock=clock, rng=random.Random(7))
    connections.hold_only([key])
    connection = connections.connect(key)
    await eventually(lambda: harness.of(key) == [CONNECTING, FAILURE])
    first = connection.connectivity.retry_at
    assert first is not None
    assert 0.8 <= first <= 1.2
    clock.set(first - 0.001)
    await settle()
    assert harness.of(key) == [CONNECTING, FAILURE]
    assert harness.network.connects == 1
    clock.set(first)
    await eventually(lambda: harness.of(key) == [CONNECTING, FAILURE, IDLE, CONNECTING, FAILURE])
    second = connection.connectivity.retry_at
    assert second is not None
    assert 1.6 * 0.8 <= second - first <= 1.6 * 1.2
    assert harness.network.connects == 2


async def test_a_failed_connect_after_ready_is_transient_failure_and_a_success_resets_it(
    harness: Harness,
) -> None:
    """A READY endpoint whose backend went away fails its next connect: TRANSIENT_FAILURE and
    the request fails as a ConnectError; once the backend is back, a request connects and the
    endpoint is READY again with its backoff reset."""
    async with http_backends(1) as (backend,):
        connections = harness(clock=FakeClock())
        connections.hold_only([backend.address])
        connection = connections.connect(backend.address)
        await get(connection)
        await backend.stop(keep_port=True)
        with pytest.raises(httpx.ConnectError):
            await get(connection)
        assert harness.of(backend.address) == [CONNECTING, READY, FAILURE]
        await backend.start()
        await get(connection)
        assert harness.of(backend.address) == [CONNECTING, READY, FAILURE, READY]
        assert connection.connectivity.failures == 0
        assert connection.connectivity.retry_at is None


# --- the connectivity table, exhaustively ---


@pytest.mark.parametrize("state", list(ConnectivityState))
@pytest.mark.parametrize("event", list(ConnectEvent))
def test_every_state_and_event_is_in_the_table_or_refused(
    state: ConnectivityState, event: ConnectEvent
) -> None:
    """Each (state, event) either moves to the table's state or raises ProtocolError; only a
    TRANSIENT_FAILURE endpoint has a backoff to end."""
    connectivity = EndpointConnectivity()
    connectivity.state = state
    if state is FAILURE:
        connectivity.retry_at = 1.0
    expected = TRANSITIONS.get((state, event))
    if expected is None:
        with pytest.raises(ProtocolError):
            connectivity.step(event, 0.0, random.Random(1))
        assert event is ConnectEvent.BACKOFF_ELAPSED
        return
    changed = connectivity.step(event, 0.0, random.Random(1))
    assert connectivity.state is expected
    assert changed is (expected if expected is not state else None)
    assert (connectivity.retry_at is not None) == (expected is FAILURE)


def test_consecutive_failures_lengthen_the_backoff_up_to_its_cap() -> None:
    """Backoffs follow gRPC's: 1 s, then x1.6 per consecutive failure, capped at 120 s, each
    within +-20 %."""
    backoff = Backoff()
    rng = random.Random(3)
    for failures, base in [(1, 1.0), (2, 1.6), (3, 2.56), (12, 120.0), (40, 120.0)]:
        delay = backoff.delay(failures, rng)
        assert base * 0.8 <= delay <= base * 1.2
