"""`XdsClient.resolve`: Envoy's on-demand outcomes, one subscription per name, the batching of
names asked while the first request is unanswered, and the grace period, on a fake clock."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.builders import cluster
from tests.helpers import eventually, idle
from tests.ondemand.conftest import GRACE
from xdsclient import (
    Available,
    CallbackWatcher,
    ClientClosedError,
    Missing,
    ResourceTimeoutError,
    TimedOut,
    XdsClient,
)
from xdsclient.resources import CLUSTER
from xdsclient.testing import FakeClock, FakeStream, FakeTransport


def wanted(request: Any) -> set[str]:
    """The names a request asks for: SotW's full list, Delta's subscriptions."""
    if hasattr(request, "resource_names_subscribe"):
        return set(request.resource_names_subscribe)
    return set(request.resource_names)


def resolving(client: XdsClient, name: str, timeout: float = 5.0) -> asyncio.Task[Any]:
    return asyncio.ensure_future(client.resolve(CLUSTER, name, timeout=timeout))


async def test_a_cluster_the_server_sends_is_available(
    fake: FakeTransport, client: XdsClient
) -> None:
    """A resolve subscribes the name and returns the value the server sends."""
    task = resolving(client, "a")
    stream: FakeStream = await fake.stream()
    assert wanted(await stream.request()) == {"a"}
    stream.send([cluster("a")])
    outcome = await task
    assert isinstance(outcome, Available)
    assert outcome.view.name == "a"
    assert client.stats().resolves == {"available": 1, "missing": 0, "timed_out": 0}


async def test_a_name_removed_by_a_delta_server_is_missing(
    fake: FakeTransport, delta_client: XdsClient
) -> None:
    """Delta: ``removed_resources`` naming what we asked for is Missing at once."""
    task = resolving(delta_client, "a")
    stream = await fake.stream()
    await stream.request()
    stream.send([], type_url=CLUSTER.type_url, removed=["a"])
    outcome = await task
    assert isinstance(outcome, Missing)
    assert outcome.error.name == "a"
    assert delta_client.stats().resolves["missing"] == 1


async def test_the_does_not_exist_timer_is_missing(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    """gRFC A57's timer (15 s here) firing before the resolve's timeout is Missing."""
    task = resolving(client, "a", timeout=20.0)
    stream = await fake.stream()
    await stream.request()
    clock.advance(15.0)
    outcome = await task
    assert isinstance(outcome, Missing)
    assert isinstance(outcome.error, ResourceTimeoutError)


async def test_nothing_decisive_within_the_timeout_is_timed_out(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    """No answer within the resolve's own timeout (on the client's clock) is TimedOut."""
    task = resolving(client, "a", timeout=5.0)
    stream = await fake.stream()
    await stream.request()
    clock.advance(4.9)
    await idle()  # what 4.9 s woke has run
    assert not task.done()
    clock.advance(0.1)
    assert await task == TimedOut(timeout=5.0)
    assert client.stats().resolves["timed_out"] == 1


async def test_concurrent_resolves_of_a_name_share_one_subscription(
    fake: FakeTransport, client: XdsClient
) -> None:
    """Two resolves of one name: one request, both answered by one response."""
    first, second = resolving(client, "a"), resolving(client, "a")
    stream = await fake.stream()
    assert wanted(await stream.request()) == {"a"}
    stream.send([cluster("a")])
    assert isinstance(await first, Available)
    assert isinstance(await second, Available)
    ack = await stream.request()
    assert ack.response_nonce  # the ACK, asking for nothing new
    assert stream.pending_requests() == []


async def test_names_asked_while_the_first_request_is_unanswered_go_out_in_the_next(
    fake: FakeTransport, client: XdsClient, delta: bool
) -> None:
    """b and c, asked while a's request waits, are not requested until it is answered; then
    both go out in one request, the one after the ACK (Envoy's on-demand CDS)."""
    first = resolving(client, "a")
    stream = await fake.stream()
    assert wanted(await stream.request()) == {"a"}
    later = [resolving(client, "b"), resolving(client, "c")]
    await eventually(lambda: len(client._resolver.book) == 3)
    await idle()  # a request for b or c would have been written by now
    assert stream.pending_requests() == []  # queued, not requested
    assert all(not task.done() for task in later)
    stream.send([cluster("a")])
    assert isinstance(await first, Available)
    ack = await stream.request()
    assert ack.response_nonce
    assert wanted(ack) <= {"a"}  # the ACK asks for nothing new
    batch = await stream.request()
    assert wanted(batch) == ({"b", "c"} if delta else {"a", "b", "c"})
    stream.send([cluster("a"), cluster("b"), cluster("c")], version="2")
    assert [type(await t) for t in later] == [Available, Available]


async def test_after_the_first_answer_each_name_is_requested_when_asked(
    fake: FakeTransport, client: XdsClient
) -> None:
    """Once the first request of the type was answered, a new name is requested at once."""
    first = resolving(client, "a")
    stream = await fake.stream()
    await stream.request()
    stream.send([cluster("a")])
    await first
    await stream.request()  # the ACK
    second = resolving(client, "b")
    assert "b" in wanted(await stream.request())
    stream.send([cluster("a"), cluster("b")], version="2")
    assert isinstance(await second, Available)


async def test_a_resolved_name_is_held_for_the_grace_period_then_released(
    fake: FakeTransport, clock: FakeClock, client: XdsClient, delta: bool
) -> None:
    """Within the grace period a resolve is answered from the hold without a request; the
    grace period after the last resolve, the name is unsubscribed."""
    first = resolving(client, "a")
    stream = await fake.stream()
    await stream.request()
    stream.send([cluster("a")])
    await first
    await stream.request()  # the ACK
    clock.advance(GRACE - 1)
    again = await client.resolve(CLUSTER, "a", timeout=1.0)  # answered now: no clock moves
    assert isinstance(again, Available)
    clock.advance(GRACE - 1)  # 2 * GRACE - 2 after the first, GRACE - 1 after the second
    other = resolving(client, "b")  # its request shows that a was not released before it
    request = await stream.request()
    if delta:
        assert (list(request.resource_names_subscribe), request.resource_names_unsubscribe) == (
            ["b"],
            [],
        )
    else:
        assert set(request.resource_names) == {"a", "b"}
    stream.send([cluster("a"), cluster("b")], version="2")
    await other
    await stream.request()  # the ACK
    clock.advance(1)
    release = await stream.request()
    if delta:
        assert list(release.resource_names_unsubscribe) == ["a"]
    else:
        assert list(release.resource_names) == ["b"]
    await eventually(lambda: client.resource_state(CLUSTER, "a") is None)


async def test_a_name_something_watches_stays_subscribed_after_the_grace_period(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    """The hold's release drops only the hold: a watcher of the name keeps it subscribed,
    and a resolve of a name it watches needs no request of its own."""
    seen: list[Any] = []
    client.add_watcher(CLUSTER, "a", CallbackWatcher(seen.append))
    stream = await fake.stream()
    await stream.request()
    stream.send([cluster("a")])
    await eventually(lambda: seen)
    await stream.request()  # the ACK
    assert isinstance(await client.resolve(CLUSTER, "a", timeout=1.0), Available)
    clock.advance(GRACE + 1)
    second = resolving(client, "b")  # a request of its own comes next, not a release of a
    request = await stream.request()
    assert "a" in wanted(request) or not hasattr(request, "resource_names")
    assert not getattr(request, "resource_names_unsubscribe", [])
    stream.send([cluster("a"), cluster("b")], version="2")
    assert isinstance(await second, Available)
    assert client.resource_state(CLUSTER, "a") is not None


async def test_a_resolve_waiting_when_the_client_closes_raises(
    fake: FakeTransport, clock: FakeClock
) -> None:
    """Closing the client ends a waiting resolve with `ClientClosedError`."""
    client = XdsClient("fake:1", node_id="n", transport=fake, clock=clock)
    await client.start()
    task = resolving(client, "a")
    stream = await fake.stream()
    await stream.request()
    await client.close()
    with pytest.raises(ClientClosedError):
        await task


@pytest.mark.parametrize("timeout", [0, -1.0, True, float("nan"), "5"])
async def test_a_timeout_that_is_not_a_positive_number_is_refused(
    client: XdsClient, timeout: Any
) -> None:
    """``timeout`` must be a positive number of seconds (``True`` is not one)."""
    with pytest.raises(ValueError, match="timeout"):
        await client.resolve(CLUSTER, "a", timeout=timeout)


async def test_csds_shows_a_resolved_cluster_as_any_other(
    fake: FakeTransport, client: XdsClient
) -> None:
    """A name resolved on demand is in the CSDS dump like a watched one, with its version."""
    task = resolving(client, "a")
    stream = await fake.stream()
    await stream.request()
    stream.send([cluster("a")], version="7")
    await task
    [generic] = [c for c in client.csds().generic_xds_configs if c.name == "a"]
    assert generic.type_url == CLUSTER.type_url
    assert generic.version_info == "7"
    from envoy.admin.v3 import config_dump_shared_pb2

    assert generic.client_status == config_dump_shared_pb2.ClientResourceStatus.ACKED


async def test_metrics_count_resolves_by_outcome(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    """``xdsclient.resolves`` counts finished resolves, labelled by outcome."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from tests.shell.test_metrics import _points

    reader = InMemoryMetricReader()
    client.enable_metrics(MeterProvider(metric_readers=[reader]), target="xds:///svc")
    found, lost = resolving(client, "a"), resolving(client, "b", timeout=1.0)
    stream = await fake.stream()
    await stream.request()
    stream.send([cluster("a")])
    assert isinstance(await found, Available)
    clock.advance(1.0)
    assert isinstance(await lost, TimedOut)
    counts = {
        attributes["xdsclient.resolve.outcome"]: value
        for value, attributes in _points(reader)["xdsclient.resolves"]
    }
    assert counts == {"available": 1, "timed_out": 1}  # no point for an outcome not seen


async def test_a_cancelled_resolve_counts_nothing_blocks_no_other_and_is_released_later(
    fake: FakeTransport, clock: FakeClock, client: XdsClient, delta: bool
) -> None:
    """A resolve its caller cancels before any answer counts no outcome, lets the next name of
    its type go out at once (it no longer waits behind it), and its name is unsubscribed the
    grace period later (it was held for the client's life)."""
    first = resolving(client, "a")
    stream = await fake.stream()
    assert wanted(await stream.request()) == {"a"}
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await idle()
    assert client.stats().resolves == {"available": 0, "missing": 0, "timed_out": 0}
    later = resolving(client, "b", timeout=10 * GRACE)
    assert "b" in wanted(await stream.request())  # not queued behind a
    await idle()  # b's does-not-exist timer is armed, at the time of its request
    clock.advance(GRACE)
    release = await stream.request()
    if delta:
        assert list(release.resource_names_unsubscribe) == ["a"]
    else:
        assert list(release.resource_names) == ["b"]
    # the grace period (20 s) outlasts b's does-not-exist timer (15 s): b's own outcome is
    # the one count; the cancelled resolve adds none, however the two wake-ups interleave
    assert isinstance(await later, Missing)
    await idle()
    assert client.stats().resolves == {"available": 0, "missing": 1, "timed_out": 0}


def grace_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "xdsclient-resolve-grace"]


async def test_one_timer_releases_every_name_at_the_end_of_its_own_grace_period(
    fake: FakeTransport, clock: FakeClock, delta_client: XdsClient
) -> None:
    """Names resolved at different times share one grace task, and each is unsubscribed
    exactly the grace period after its own last resolve."""
    first = resolving(delta_client, "a")
    stream = await fake.stream()
    await stream.request()
    stream.send([cluster("a")])
    await first
    await stream.request()  # the ACK
    clock.advance(5.0)
    second = resolving(delta_client, "b")
    assert wanted(await stream.request()) == {"b"}
    stream.send([cluster("b")], version="2")
    await second
    await stream.request()  # the ACK
    await idle()
    assert len(grace_tasks()) == 1
    clock.advance(GRACE - 5.0)
    release = await stream.request()
    assert list(release.resource_names_unsubscribe) == ["a"]
    await idle()
    assert stream.pending_requests() == []  # b is not due yet
    clock.advance(5.0)
    release = await stream.request()
    assert list(release.resource_names_unsubscribe) == ["b"]
    await idle()
    assert grace_tasks() == []
    assert delta_client._resolver.held() == {}


async def test_a_timed_out_resolve_leaves_no_bookkeeping_after_its_grace_period(
    fake: FakeTransport, clock: FakeClock, delta_client: XdsClient
) -> None:
    """Once a timed-out name's grace period ends, nothing of it is kept: no hold, no book
    entry, no list of waiters."""
    task = resolving(delta_client, "a", timeout=1.0)
    stream = await fake.stream()
    await stream.request()
    clock.advance(1.0)
    assert await task == TimedOut(timeout=1.0)
    clock.advance(GRACE)
    await stream.request()  # the release
    await idle()
    resolver = delta_client._resolver
    assert (resolver.held(), len(resolver.book), resolver._waiters) == ({}, 0, {})
