"""`XdsTransport` follows Envoy's outlier detection end to end, over real backends and on a
`FakeClock` given to the transport: a backend answering 503 is ejected after five in a row
(Envoy's default ``consecutive_5xx``, before any interval sweep), traffic moves to the others,
and it comes back at the first sweep once ``base_ejection_time`` has passed, not before; so is
one holding five requests in a row past the caller's own read timeout."""

from __future__ import annotations

import httpx
import pytest

from tests.sync.conftest import Plane, plane  # noqa: F401  # the control plane fixture
from xdsclient import ClientOptions, XdsClient
from xdsclient.httpx import XdsSyncTransport, XdsTransport
from xdsclient.sync import SyncXdsClient
from xdsclient.testing import Behaviour, ControlPlane, FakeClock, HttpBackend

from .resources import LISTENER, cluster_of, resources, route_config, to, vhost

pytestmark = pytest.mark.timeout(30)


async def get(http: httpx.AsyncClient, count: int) -> list[int]:
    return [(await http.get("http://svc/")).status_code for _ in range(count)]


async def test_five_503_in_a_row_eject_a_backend_until_the_sweep_after_base_ejection_time(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """Round robin over three, sweeps every 1 s, ``base_ejection_time`` 30 s, on the
    transport's fake clock: backend a answers its first five requests 503; the fifth ejects
    it with the clock still at 0 (no sweep has run), the next requests reach only b and c; a
    is still out after a sweep at 29.5 s and at 30.25 s (its time is up, the next sweep is
    not due), and answers again from the sweep at 30.5 s."""
    a, b, c = three
    clock = FakeClock()
    cluster, assignment = cluster_of("c", three)
    detection = cluster.outlier_detection
    detection.interval.FromSeconds(1)
    detection.base_ejection_time.FromSeconds(30)
    detection.max_ejection_percent.value = 50  # Envoy's 10 % would let none of three go
    cp.set_all(resources(route_config(vhost("v", ["*"], to("c"))), [cluster, assignment]))
    a.script("*", *[Behaviour(status=503)] * 5, then=Behaviour(status=200))
    async with (
        XdsTransport(LISTENER, client=client, _clock=clock) as transport,
        httpx.AsyncClient(transport=transport, timeout=10) as http,
    ):
        statuses = await get(http, 15)
        assert statuses.count(503) == 5
        assert a.total == 5
        assert await get(http, 10) == [200] * 10
        assert a.total == 5  # ejected: b and c took them
        assert b.total + c.total == 20
        for now in (29.5, 30.25):
            clock.set(now)
            assert await get(http, 6) == [200] * 6
            assert a.total == 5, f"a back at {now} s"
        clock.set(30.5)
        assert await get(http, 6) == [200] * 6
        assert a.total == 7  # one in three of round robin's picks again


async def test_five_read_timeouts_in_a_row_eject_a_backend_that_hangs(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """Round robin over three, Envoy's default ``consecutive_5xx`` (five), on the transport's
    fake clock standing at 0 (the route's 15 s deadline never near): backend a holds its
    first five requests past the caller's own httpx read timeout, each an upstream timeout
    (a 504 to outlier detection, as Envoy counts its ``upstream_rq_timeout``), so the fifth
    ejects it and the next requests reach only b and c."""
    a = three[0]
    clock = FakeClock()
    cluster, assignment = cluster_of("c", three)
    detection = cluster.outlier_detection
    detection.base_ejection_time.FromSeconds(30)
    detection.max_ejection_percent.value = 50  # Envoy's 10 % would let none of three go
    cp.set_all(resources(route_config(vhost("v", ["*"], to("c"))), [cluster, assignment]))
    a.script("*", *[Behaviour(delay=5)] * 5, then=Behaviour(status=200))
    timeout = httpx.Timeout(10, read=0.2)
    async with (
        XdsTransport(LISTENER, client=client, _clock=clock) as transport,
        httpx.AsyncClient(transport=transport, timeout=timeout) as http,
    ):
        timeouts = 0
        while a.total < 5:
            try:
                assert (await http.get("http://svc/")).status_code == 200
            except httpx.ReadTimeout:
                timeouts += 1
        assert timeouts == 5
        assert await get(http, 10) == [200] * 10
        assert a.total == 5  # ejected: b and c took them


def test_the_sync_transport_takes_the_clock_to_its_loop_thread(
    plane: Plane,  # noqa: F811
) -> None:
    """`XdsSyncTransport` passes the fake clock to the `XdsTransport` it runs: two backends,
    ``consecutive_5xx`` 1, a ejected at its first 503 comes back only from the sweep after
    ``base_ejection_time`` on that clock (moved on the loop thread), as async."""
    clock = FakeClock()
    a, b = HttpBackend("a"), HttpBackend("b")
    for backend in (a, b):
        plane.thread.run(backend.start())
    options = ClientOptions(does_not_exist_timeout=1.0)
    try:
        cluster, assignment = cluster_of("c", [a, b])
        detection = cluster.outlier_detection
        detection.consecutive_5xx.value = 1
        detection.interval.FromSeconds(1)
        detection.base_ejection_time.FromSeconds(30)
        detection.max_ejection_percent.value = 50
        plane.set(*resources(route_config(vhost("v", ["*"], to("c"))), [cluster, assignment]))
        a.script("*", Behaviour(status=503), then=Behaviour(status=200))
        with (
            SyncXdsClient(plane.address, node_id="sync-outlier", options=options) as xds,
            httpx.Client(transport=XdsSyncTransport(LISTENER, client=xds, _clock=clock)) as http,
        ):
            statuses = [http.get("http://svc/").status_code for _ in range(6)]
            assert (statuses.count(503), a.total) == (1, 1)
            for now in (29.5, 30.25):  # a sweep at 29.5 s; at 30.25 s the next is not due
                xds.loop_thread.call(clock.set, now)
                assert [http.get("http://svc/").status_code for _ in range(4)] == [200] * 4
                assert a.total == 1, f"a back at {now} s"
            xds.loop_thread.call(clock.set, 30.5)
            assert [http.get("http://svc/").status_code for _ in range(4)] == [200] * 4
            assert a.total == 3
    finally:
        for backend in (a, b):
            plane.thread.run(backend.stop())
