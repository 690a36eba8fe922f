"""A request its caller gives up on is no upstream failure, as Envoy counts a downstream reset;
a caller's own timeout passing while the upstream holds back the headers is one.

Each test serves one cluster whose outlier detection ejects an endpoint at its first 5xx
(``consecutive_5xx`` 1) and which reports load: a request cancelled while it waits for its
response, one cancelled while its body is read, a sync reader whose timeout passes mid-body and
one closing a streamed body early leave the endpoint in (the next request is answered, not 503),
and the load report counts the request issued and no longer in progress, neither successful nor
in error when no response came (Envoy's LRS; gRPC counts a cancelled call in error), by its
status when one did. A sync caller's read timeout passing before the headers came is Envoy's
upstream timeout: the endpoint is ejected and the request counted in error. The connection's
request ends with each.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from tests.helpers import eventually
from tests.sync.conftest import Plane, plane, until  # noqa: F401  # the control plane fixture
from xdsclient import ClientOptions, XdsClient
from xdsclient.httpx import XdsTransport
from xdsclient.httpx._sync import XdsSyncTransport
from xdsclient.sync import SyncXdsClient
from xdsclient.testing import Behaviour, ControlPlane, HttpBackend, http_backends

from ..lrs.test_end_to_end import _totals
from .backends import StreamingBackend, streaming_backend
from .resources import LISTENER, ejecting

pytestmark = pytest.mark.timeout(30)

#: (cluster, EDS service, zone) of the one cluster's load in the reports
LOAD = ("c", "", "z-c")


@pytest.fixture
async def client(cp: ControlPlane) -> AsyncIterator[XdsClient]:
    cp.load_reporting.configure(send_all_clusters=True, interval=0.2)
    options = ClientOptions(does_not_exist_timeout=1.0)
    async with XdsClient(cp.address, node_id="xds-cancel", options=options) as xds_client:
        yield xds_client


def requests_on(transport: Any, port: int) -> int:
    """The requests running on the `XdsTransport`'s connection to 127.0.0.1:``port`` (on
    its loop)."""
    return int(transport._core.connections.connect(("127.0.0.1", port)).requests)


@pytest.mark.parametrize("http2", [False, True], ids=["HTTP/1.1", "HTTP/2"])
async def test_a_request_cancelled_before_its_response_counts_as_no_failure(
    cp: ControlPlane, client: XdsClient, http2: bool
) -> None:
    """The task awaiting a request the backend holds is cancelled: the backend is not
    ejected, the connection's request (HTTP/2: its stream) ended, and the load report counts
    the request issued, neither successful nor in error."""
    async with http_backends(names=("a",)) as (a,):
        cp.set_all(ejecting([a], lrs=True))
        a.script("/hold", Behaviour(delay=5))
        async with (
            XdsTransport(LISTENER, client=client, http1=not http2, http2=http2) as transport,
            httpx.AsyncClient(transport=transport, timeout=10) as http,
        ):
            held = asyncio.ensure_future(http.get("http://svc/hold"))
            await eventually(lambda: a.total == 1, what="the held request at a")
            held.cancel()
            with pytest.raises(asyncio.CancelledError):
                await held
            assert requests_on(transport, a.port) == 0
            after = await http.get("http://svc/after")
            assert (after.status_code, after.http_version) == (
                200,
                "HTTP/2" if http2 else "HTTP/1.1",
            )
            await eventually(lambda: _totals(cp.load_reports).get(LOAD) == [2, 1, 0], 8)


async def test_a_request_cancelled_while_its_body_is_read_counts_by_its_status(
    cp: ControlPlane, client: XdsClient
) -> None:
    """The task reading a 200's body is cancelled after the first chunk: the backend is not
    ejected (a cut body is no reset when the caller cut it), and the load report counts the
    request a success, as Envoy counts it when the headers came."""
    async with streaming_backend() as a:
        cp.set_all(ejecting([a], lrs=True))
        async with (
            XdsTransport(LISTENER, client=client) as transport,
            httpx.AsyncClient(transport=transport, timeout=10) as http,
        ):
            first: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

            async def read() -> None:
                async with http.stream("GET", "http://svc/stream") as response:
                    chunks = response.aiter_raw()
                    first.set_result(await anext(chunks))
                    async for _ in chunks:
                        pass

            reading = asyncio.ensure_future(read())
            assert await asyncio.wait_for(first, 5) == b"first"
            reading.cancel()
            with pytest.raises(asyncio.CancelledError):
                await reading
            assert requests_on(transport, a.port) == 0
            a.gate.set()
            after = await http.get("http://svc/after")
            assert (after.status_code, after.content) == (200, b"firstsecond")
            await eventually(lambda: _totals(cp.load_reports).get(LOAD) == [2, 2, 0], 8)


# --- sync callers ---


@pytest.fixture
def xds(plane: Plane) -> Iterator[SyncXdsClient]:  # noqa: F811
    plane.thread.call(
        functools.partial(plane.server.load_reporting.configure, send_all_clusters=True),
    )
    plane.thread.call(functools.partial(plane.server.load_reporting.configure, interval=0.2))
    options = ClientOptions(does_not_exist_timeout=1.0)
    with SyncXdsClient(plane.address, node_id="sync-cancel", options=options) as client:
        yield client


def test_a_sync_callers_read_timeout_before_the_headers_is_an_upstream_timeout(
    plane: Plane,  # noqa: F811
    xds: SyncXdsClient,
) -> None:
    """``httpx.Client``'s read timeout passes while the backend holds the request (the route's
    timeout is Envoy's 15 s): the caller gets ``httpx.ReadTimeout``, but the upstream kept it
    waiting, which Envoy counts as an upstream timeout (a 504 to outlier detection): the
    backend is ejected (the next request is answered 503 here), the connection's request
    ended, and the load report counts the request issued and in error."""
    a = HttpBackend("a")
    plane.thread.run(a.start())
    try:
        plane.set(*ejecting([a], lrs=True))
        a.script("/hold", Behaviour(delay=5))
        transport = XdsSyncTransport(LISTENER, client=xds)
        with httpx.Client(transport=transport) as http:
            with pytest.raises(httpx.ReadTimeout):
                http.get("http://svc/hold", timeout=httpx.Timeout(10, read=0.3))
            assert xds.loop_thread.call(requests_on, transport._transport, a.port) == 0
            assert http.get("http://svc/after", timeout=10).status_code == 503
            assert a.total == 1
            until(lambda: _totals(plane.server.load_reports).get(LOAD) == [1, 0, 1], 8, what="LRS")
    finally:
        plane.thread.run(a.stop())


def test_a_sync_reader_giving_up_on_a_body_counts_by_its_status(
    plane: Plane,  # noqa: F811
    xds: SyncXdsClient,
) -> None:
    """A 200 whose body stalls after its first chunk: a sync reader whose own read timeout
    passes mid-body, and one closing the streamed body after the first chunk, leave the
    backend in, and the load report counts both requests successes."""
    context = streaming_backend()
    a: StreamingBackend = plane.thread.run(context.__aenter__())
    try:
        plane.set(*ejecting([a], lrs=True))
        transport = XdsSyncTransport(LISTENER, client=xds)
        with httpx.Client(transport=transport) as http:
            with pytest.raises(httpx.ReadTimeout):
                http.get("http://svc/timeout", timeout=httpx.Timeout(10, read=0.3))
            with http.stream("GET", "http://svc/closed", timeout=10) as response:
                assert next(response.iter_raw()) == b"first"
            assert xds.loop_thread.call(requests_on, transport._transport, a.port) == 0
            plane.thread.call(a.gate.set)
            after = http.get("http://svc/after", timeout=10)
            assert (after.status_code, after.content) == (200, b"firstsecond")
            until(lambda: _totals(plane.server.load_reports).get(LOAD) == [3, 3, 0], 8, what="LRS")
    finally:
        plane.thread.run(context.__aexit__(None, None, None))
