"""The cap on the authorities (config watches) one `XdsTransport` keeps: a flood of Host
headers cannot grow them without bound; past the cap, the least recently used watch with no
request running makes room (on the transport's clock), and when each has a request running
the new authority is answered 503 naming the cap."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.helpers import eventually
from xdsclient import XdsClient
from xdsclient.httpx import ERROR_HEADER, XdsTransport
from xdsclient.resources import CLUSTER
from xdsclient.testing import Behaviour, ControlPlane, FakeClock, HttpBackend

from .resources import LISTENER, cluster_of, resources, route_config, to, vhost

pytestmark = pytest.mark.timeout(30)


def _subscribed(cp: ControlPlane) -> set[str]:
    """The clusters the client's last CDS request names."""
    requests = [r for r in cp.requests if r.type_url == CLUSTER.type_url]
    return set(requests[-1].message.resource_names) if requests else set()


def _serve_three(cp: ControlPlane, three: list[HttpBackend]) -> None:
    a, b, c = three
    routes = route_config(
        vhost("a", ["a.svc"], to("a")),
        vhost("b", ["b.svc"], to("b")),
        vhost("c", ["c.svc"], to("c")),
    )
    cp.set_all(resources(routes, cluster_of("a", [a]), cluster_of("b", [b]), cluster_of("c", [c])))


async def test_a_new_authority_past_the_cap_releases_the_least_recently_used_watch(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """With ``max_authorities=2``, a third Host releases the watch used longest ago (not the
    one made first), its clusters unsubscribed; the watches kept stay at the cap."""
    _serve_three(cp, three)
    clock = FakeClock()
    async with (
        XdsTransport(LISTENER, client=client, max_authorities=2, _clock=clock) as transport,
        httpx.AsyncClient(transport=transport) as http,
    ):
        core = transport._core
        for host in ("a.svc", "b.svc", "a.svc"):  # b is now the least recently used
            assert (await http.get(f"http://{host}/")).status_code == 200
            clock.advance(1)
        assert _subscribed(cp) == {"a", "b"}
        assert (await http.get("http://c.svc/")).status_code == 200
        assert core.authorities() == ["a.svc", "c.svc"]
        await eventually(lambda: _subscribed(cp) == {"a", "c"}, what="b unsubscribed")
        for host in ("x1.svc", "x2.svc", "x3.svc"):  # a flood of unknown hosts: 404s
            assert (await http.get(f"http://{host}/")).status_code == 404
            clock.advance(1)
        assert len(core.authorities()) == 2


async def test_past_the_cap_with_a_request_running_on_each_watch_answers_503_naming_it(
    cp: ControlPlane, client: XdsClient, three: list[HttpBackend]
) -> None:
    """With ``max_authorities=1`` and a request still running on the one watch, a request
    for another Host is answered 503 naming the cap (no watch made); once the running
    request ends, the other Host takes its place."""
    _serve_three(cp, three)
    a, b, _ = three
    a.script("/slow", Behaviour(delay=1.0))
    async with (
        XdsTransport(LISTENER, client=client, max_authorities=1) as transport,
        httpx.AsyncClient(transport=transport) as http,
    ):
        slow = asyncio.ensure_future(http.get("http://a.svc/slow"))
        await eventually(lambda: a.total == 1, what="the slow request at a")
        r = await http.get("http://b.svc/")
        assert r.status_code == 503
        assert "max_authorities" in r.headers[ERROR_HEADER]
        assert "b.svc not routed" in r.headers[ERROR_HEADER]
        assert b.total == 0
        assert transport._core.authorities() == ["a.svc"]
        assert (await slow).status_code == 200
        assert (await http.get("http://b.svc/")).status_code == 200
        assert transport._core.authorities() == ["b.svc"]


def test_max_authorities_below_one_is_refused() -> None:
    """A cap under 1 could route nothing: the transport refuses it when made."""
    with pytest.raises(ValueError, match="max_authorities"):
        XdsTransport(LISTENER, client=XdsClient("127.0.0.1:1"), max_authorities=0)
