"""`ConfigWatch.resolve_cluster`: clusters a data plane needs at request time, on a fake clock.

One subscription per name, names batched while the first on-demand CDS request is
unanswered, `Available` only once a published snapshot holds the cluster with its endpoints,
`Missing` from Delta's ``removed_resources`` and from SotW's does-not-exist timer, `TimedOut`,
and the grace period after the last holder (a held subscription keeps the cluster longer).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable
from typing import Any

import pytest
from envoy.config.route.v3 import route_components_pb2, route_pb2

from tests.builders import cluster, endpoints, listener
from tests.helpers import idle
from tests.ondemand.conftest import GRACE
from xdsclient import (
    Available,
    ClientClosedError,
    ConfigWatch,
    Missing,
    ResourceTimeoutError,
    TimedOut,
    XdsClient,
    XdsConfig,
    XdsError,
)
from xdsclient.resources import CLUSTER, ENDPOINT
from xdsclient.testing import FakeClock, FakeStream, FakeTransport
from xdsclient.testing._fake_transport import _name_of

C, E = CLUSTER.type_url, ENDPOINT.type_url


def header_routes() -> Any:
    """``/a/`` goes to cluster a; every other path to the cluster ``x-cluster`` names."""
    message = route_pb2.RouteConfiguration(name="routes")
    vhost = message.virtual_hosts.add(name="vh", domains=["*"])
    vhost.routes.add(route=route_components_pb2.RouteAction(cluster="a")).match.prefix = "/a/"
    by_header = vhost.routes.add(route=route_components_pb2.RouteAction(cluster_header="x-cluster"))
    by_header.match.prefix = "/"
    return message


class Server:
    """Plays the management server on a fake ADS stream: each request asking for names not
    answered yet is answered with the resources it holds of them (SotW: the whole list asked,
    a full state; Delta: the new names, and the ones it lacks in ``removed_resources``).
    A type on `hold` is not answered until released."""

    def __init__(self, stream: FakeStream, resources: Iterable[Any]) -> None:
        self.stream = stream
        self.delta = stream.spec.delta
        self.table: dict[str, dict[str, Any]] = {}
        for message in resources:
            type_url = f"type.googleapis.com/{message.DESCRIPTOR.full_name}"
            self.table.setdefault(type_url, {})[_name_of(message)] = message
        self.asked: dict[str, set[str]] = {}  # SotW: the last list answered
        self.held: set[str] = set()
        self.waiting: list[Any] = []
        self.versions = itertools.count(1)
        self.removed: list[tuple[str, str]] = []  # Delta: (type URL, name) sent as removed

    def hold(self, type_url: str) -> None:
        self.held.add(type_url)

    def release(self, type_url: str) -> None:
        self.held.discard(type_url)
        waiting, self.waiting = self.waiting, []
        for request in waiting:
            self.answer(request)

    def serve(self) -> int:
        """Answer the requests written so far; how many were read."""
        requests = self.stream.pending_requests()
        for request in requests:
            self.answer(request)
        return len(requests)

    def answer(self, request: Any) -> None:
        if request.type_url in self.held:
            self.waiting.append(request)
            return
        have = self.table.get(request.type_url, {})
        version = str(next(self.versions))
        if self.delta:
            new = list(request.resource_names_subscribe)
            if new:
                self.removed += [(request.type_url, n) for n in new if n not in have]
                self.stream.send(
                    [have[n] for n in new if n in have],
                    type_url=request.type_url,
                    version=version,
                    removed=[n for n in new if n not in have],
                )
            return
        names = set(request.resource_names)
        if names != self.asked.get(request.type_url):
            self.asked[request.type_url] = names
            found = [have[n] for n in sorted(names) if n in have]
            self.stream.send(found, type_url=request.type_url, version=version)


async def settle(server: Server) -> None:
    """Answer until the client asks for nothing more and the loop is idle."""
    for _ in range(50):
        await idle()
        if not server.serve():
            return
    pytest.fail("the client kept asking")


def cluster_requests(stream: FakeStream, name: str) -> list[Any]:
    """The CDS requests that newly asked for ``name``."""
    found, before = [], set()
    for request in stream.requests:
        if request.type_url != C:
            continue
        if hasattr(request, "resource_names_subscribe"):
            if name in request.resource_names_subscribe:
                found.append(request)
            continue
        names = set(request.resource_names)
        if name in names and name not in before:
            found.append(request)
        before = names
    return found


def unsubscribed(stream: FakeStream, type_url: str, name: str, delta: bool) -> bool:
    """Whether the client's latest request of the type dropped ``name``."""
    requests = [r for r in stream.requests if r.type_url == type_url]
    if delta:
        return any(name in r.resource_names_unsubscribe for r in requests)
    return name not in requests[-1].resource_names


RESOURCES = [
    listener("svc"),
    header_routes(),
    cluster("a"),
    endpoints("a"),
    cluster("b"),
    endpoints("b"),
    cluster("c"),
    endpoints("c"),
]


@pytest.fixture
async def served(fake: FakeTransport, client: XdsClient) -> tuple[ConfigWatch, Server]:
    """A config watch of ``svc`` with its first snapshot (cluster a only) published."""
    watch = client.watch_config("svc")
    server = Server(await fake.stream(), RESOURCES)
    await settle(server)
    first = await anext(watch)
    assert isinstance(first, XdsConfig)
    assert list(first.clusters) == ["a"]
    return watch, server


def latest(watch: ConfigWatch) -> XdsConfig:
    """The watch's latest complete snapshot (there is one)."""
    config = watch.latest
    assert config is not None
    return config


def resolving(watch: ConfigWatch, name: str, timeout: float = 5.0) -> asyncio.Task[Any]:
    return asyncio.ensure_future(watch.resolve_cluster(name, timeout=timeout))


async def test_a_resolved_cluster_is_in_the_next_snapshot_with_its_endpoints(
    served: tuple[ConfigWatch, Server], client: XdsClient
) -> None:
    """Available once the watch published a snapshot holding the cluster and its endpoints;
    that snapshot is the consumer's next one, and names it as dynamic."""
    watch, server = served
    task = resolving(watch, "b")
    await settle(server)
    outcome = await task
    assert isinstance(outcome, Available)
    assert outcome.view.name == "b"
    snapshot = await anext(watch)
    assert isinstance(snapshot, XdsConfig)
    assert snapshot is watch.latest
    assert sorted(snapshot.clusters) == ["a", "b"]
    assert snapshot.clusters["b"].endpoints is not None
    assert snapshot.dynamic_clusters == {"b"}
    assert client.stats().cluster_resolves == {"available": 1, "missing": 0, "timed_out": 0}
    watch.cancel()


async def test_available_waits_for_the_clusters_endpoints(
    served: tuple[ConfigWatch, Server],
) -> None:
    """The cluster alone is not enough: the resolve waits until its endpoints are in a
    published snapshot, so a data plane can pick in it."""
    watch, server = served
    server.hold(E)
    task = resolving(watch, "b")
    await settle(server)
    assert cluster_requests(server.stream, "b")  # the cluster was asked for and answered
    assert not task.done()
    assert "b" not in (watch.latest.clusters if watch.latest else {})
    server.release(E)
    await settle(server)
    assert isinstance(await task, Available)
    assert latest(watch).clusters["b"].endpoints is not None
    watch.cancel()


async def test_concurrent_resolves_of_a_cluster_share_one_subscription(
    served: tuple[ConfigWatch, Server],
) -> None:
    """Two resolves of one cluster: one request asks for it, one answer settles both."""
    watch, server = served
    tasks = [resolving(watch, "b"), resolving(watch, "b")]
    await settle(server)
    assert [type(await t) for t in tasks] == [Available, Available]
    assert len(cluster_requests(server.stream, "b")) == 1
    watch.cancel()


async def test_clusters_asked_while_the_first_is_unanswered_go_out_together(
    served: tuple[ConfigWatch, Server], delta: bool
) -> None:
    """c, asked while b's request waits for its answer, is not requested until b's is
    answered; then it goes out (Envoy's on-demand CDS batching)."""
    watch, server = served
    server.hold(C)
    first = resolving(watch, "b")
    await settle(server)
    later = resolving(watch, "c")
    await settle(server)
    assert cluster_requests(server.stream, "b")
    assert not cluster_requests(server.stream, "c")  # queued behind b
    server.release(C)
    await settle(server)
    assert [type(await t) for t in (first, later)] == [Available, Available]
    [asked] = cluster_requests(server.stream, "c")
    assert server.stream.requests.index(asked) > server.stream.requests.index(
        cluster_requests(server.stream, "b")[0]
    )
    watch.cancel()


async def test_a_resolved_cluster_leaves_the_snapshots_a_grace_period_after_its_resolve(
    served: tuple[ConfigWatch, Server], clock: FakeClock, delta: bool
) -> None:
    """Within the grace period the cluster stays (a resolve is answered at once, with no
    request); at its end it leaves the snapshot and its subscriptions are dropped."""
    watch, server = served
    task = resolving(watch, "b")
    await settle(server)
    await task
    clock.advance(GRACE - 1)
    await settle(server)
    assert "b" in latest(watch).clusters
    assert isinstance(await watch.resolve_cluster("b"), Available)  # from the snapshot
    assert len(cluster_requests(server.stream, "b")) == 1
    assert not unsubscribed(server.stream, C, "b", delta)
    clock.advance(GRACE)  # the grace period of that second resolve
    await settle(server)
    assert "b" not in latest(watch).clusters
    assert unsubscribed(server.stream, C, "b", delta)
    assert unsubscribed(server.stream, E, "b", delta)
    watch.cancel()


async def test_a_held_subscription_keeps_its_cluster_until_released(
    served: tuple[ConfigWatch, Server], clock: FakeClock, delta: bool
) -> None:
    """A `ClusterSubscription` the data plane holds keeps the cluster in the snapshots past
    any grace period; released, it leaves one grace period later."""
    watch, server = served
    subscription = watch.subscribe_cluster("b")
    task = asyncio.ensure_future(subscription.resolve(timeout=5.0))
    await settle(server)
    assert isinstance(await task, Available)
    clock.advance(3 * GRACE)
    await settle(server)
    assert "b" in latest(watch).clusters
    assert not unsubscribed(server.stream, C, "b", delta)
    subscription.release()
    subscription.release()  # idempotent
    clock.advance(GRACE)
    await settle(server)
    assert "b" not in latest(watch).clusters
    assert unsubscribed(server.stream, C, "b", delta)
    with pytest.raises(RuntimeError, match="released"):
        await subscription.resolve()
    watch.cancel()


async def test_a_cluster_removed_by_a_delta_server_is_missing(
    fake: FakeTransport, delta_client: XdsClient
) -> None:
    """Delta: the server names the cluster in ``removed_resources``: Missing at once, and the
    held name is in the next snapshot as its error."""
    watch = delta_client.watch_config("svc")
    server = Server(await fake.stream(), RESOURCES)
    await settle(server)
    task = resolving(watch, "ghost")
    await settle(server)
    outcome = await task
    assert isinstance(outcome, Missing)
    assert outcome.error.name == "ghost"
    assert server.removed == [(C, "ghost")]
    assert not latest(watch).clusters["ghost"].ok
    assert delta_client.stats().cluster_resolves["missing"] == 1
    watch.cancel()


async def test_the_sotw_does_not_exist_timer_is_missing(
    served: tuple[ConfigWatch, Server], clock: FakeClock, delta: bool
) -> None:
    """A server that never sends the cluster: gRFC A57's timer (15 s) is Missing, before the
    resolve's own 20 s (in Delta too, when the server stays silent)."""
    watch, server = served
    server.hold(C)
    task = resolving(watch, "ghost", timeout=20.0)
    await settle(server)
    clock.advance(14.9)
    await settle(server)
    assert not task.done()
    clock.advance(0.1)
    outcome = await task
    assert isinstance(outcome, Missing)
    assert isinstance(outcome.error, ResourceTimeoutError)
    watch.cancel()


async def test_nothing_decisive_within_the_timeout_is_timed_out(
    served: tuple[ConfigWatch, Server], clock: FakeClock, client: XdsClient
) -> None:
    """No answer within the resolve's timeout (on the client's clock): TimedOut, counted, and
    the cluster is not in the snapshots."""
    watch, server = served
    server.hold(C)
    task = resolving(watch, "b", timeout=5.0)
    await settle(server)
    clock.advance(4.9)
    await settle(server)
    assert not task.done()
    clock.advance(0.1)
    assert await task == TimedOut(timeout=5.0)
    assert client.stats().cluster_resolves["timed_out"] == 1
    assert "b" not in latest(watch).clusters
    watch.cancel()


async def test_a_cluster_the_snapshot_holds_is_answered_at_once(
    served: tuple[ConfigWatch, Server], client: XdsClient
) -> None:
    """A cluster a route reaches is in the snapshot: Available with no request and no
    client-level resolve."""
    watch, server = served
    sent = len(server.stream.requests)
    outcome = await watch.resolve_cluster("a")
    assert isinstance(outcome, Available)
    assert outcome.view.name == "a"
    await settle(server)
    assert len(server.stream.requests) == sent
    assert client.stats().resolves == {"available": 0, "missing": 0, "timed_out": 0}
    watch.cancel()


async def test_a_name_no_cluster_can_have_is_missing(
    served: tuple[ConfigWatch, Server],
) -> None:
    """A request header naming no possible cluster (a malformed xdstp name, the wildcard)
    is Missing, never an exception, and asks the server nothing."""
    watch, server = served
    sent = len(server.stream.requests)
    for name in ("xdstp://", "*"):
        outcome = await watch.resolve_cluster(name)
        assert isinstance(outcome, Missing)
    await settle(server)
    assert len(server.stream.requests) == sent
    watch.cancel()


async def test_a_resolve_waiting_when_the_watch_is_cancelled_times_out(
    served: tuple[ConfigWatch, Server],
) -> None:
    """Cancelling the watch answers a resolve waiting for its snapshot with TimedOut."""
    watch, server = served
    server.hold(E)
    task = resolving(watch, "b")
    await settle(server)
    assert not task.done()
    watch.cancel()
    assert await task == TimedOut(timeout=5.0)


async def test_bad_arguments_are_refused(served: tuple[ConfigWatch, Server]) -> None:
    """A timeout must be positive and a name a non-empty string."""
    watch, _ = served
    with pytest.raises(ValueError, match="timeout"):
        await watch.resolve_cluster("b", timeout=0)
    with pytest.raises(ValueError, match="cluster name"):
        watch.subscribe_cluster("")
    watch.cancel()


async def test_a_resolve_waiting_for_the_server_when_the_client_closes_raises(
    fake: FakeTransport, clock: FakeClock
) -> None:
    """Closing the client ends a resolve waiting for the server's answer with
    `ClientClosedError`; the watch, cancelled by the close, refuses new ones."""
    client = XdsClient("fake:1", node_id="n", transport=fake, clock=clock)
    await client.start()
    watch = client.watch_config("svc")
    server = Server(await fake.stream(), RESOURCES)
    await settle(server)
    server.hold(C)
    task = resolving(watch, "b")
    await settle(server)
    await client.close()
    with pytest.raises(ClientClosedError):
        await task
    with pytest.raises(XdsError, match="cancelled"):
        await watch.resolve_cluster("b")


async def test_a_subscription_dropped_while_held_warns_and_is_released(
    served: tuple[ConfigWatch, Server], clock: FakeClock
) -> None:
    """A `ClusterSubscription` dropped without `release` says so (ResourceWarning) and lets
    its cluster go after the grace period, rather than holding it for the watch's life."""
    watch, server = served
    subscription = watch.subscribe_cluster("b")
    task = asyncio.ensure_future(subscription.resolve(timeout=5.0))
    await settle(server)
    assert isinstance(await task, Available)
    del task
    with pytest.warns(ResourceWarning, match="never released"):
        del subscription  # the last reference: collected at once
    clock.advance(GRACE)
    await settle(server)
    assert "b" not in latest(watch).clusters
    watch.cancel()
