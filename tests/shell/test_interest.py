"""Interest changes that net to nothing change nothing: a resource stays cached while
someone wants it, and no request goes out for a drop and re-add in one tick."""

from __future__ import annotations

import gc

import pytest

from tests.builders import cluster, endpoints, listener, routes
from tests.helpers import idle
from xdsclient import (
    AmbientError,
    CallbackWatcher,
    DataError,
    Event,
    ResourceChanged,
    ResourceStatus,
    XdsClient,
    XdsConfig,
)
from xdsclient.resources import CLUSTER, ENDPOINT, LISTENER
from xdsclient.testing import FakeClock, FakeStream, FakeTransport


async def _acked(stream: FakeStream) -> None:
    await idle()
    stream.pending_requests()  # the ACKs


async def test_a_resource_dropped_and_readded_in_one_tick_stays_cached_without_a_request(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    first: list[Event] = []
    handle = client.add_watcher(ENDPOINT, "a", CallbackWatcher(first.append))
    stream = await fake.stream()
    stream.send([endpoints("a")])
    await _acked(stream)
    handle.cancel()
    again: list[Event] = []
    client.add_watcher(ENDPOINT, "a", CallbackWatcher(again.append))
    await idle()
    assert stream.pending_requests() == []
    clock.advance(60)
    await idle()
    assert [type(e) for e in again] == [ResourceChanged]  # the cached value, no timeout
    state = client.resource_state(ENDPOINT, "a")
    assert state is not None
    assert state.status is ResourceStatus.ACKED


async def test_a_wildcard_watch_restarted_in_one_tick_gets_the_cached_resources(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    handle = client.add_watcher(CLUSTER, "*", CallbackWatcher(lambda event: None))
    stream = await fake.stream()
    stream.send([cluster("a"), cluster("b")])
    await _acked(stream)
    handle.cancel()
    again: list[Event] = []
    client.add_watcher(CLUSTER, "*", CallbackWatcher(again.append))
    await idle()
    assert stream.pending_requests() == []
    assert sorted(e.name for e in again if isinstance(e, ResourceChanged)) == ["a", "b"]


async def test_a_dropped_resource_leaves_the_cache_once_the_unsubscription_is_settled(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    handle = client.add_watcher(ENDPOINT, "a", CallbackWatcher(lambda event: None))
    stream = await fake.stream()
    stream.send([endpoints("a")])
    await _acked(stream)
    handle.cancel()
    await idle()
    assert client.resource_state(ENDPOINT, "a") is None
    assert len(stream.pending_requests()) == 1  # the unsubscription
    seen: list[Event] = []
    client.add_watcher(ENDPOINT, "a", CallbackWatcher(seen.append))
    await idle()
    assert len(stream.pending_requests()) == 1  # asked for again
    assert seen == []


async def test_a_config_watch_recreated_in_one_tick_publishes_the_cached_snapshot(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    first = client.watch_config("l")
    stream = await fake.stream()
    stream.send([listener("l", route="r")])
    await idle()
    stream.send([routes("c", name="r")])
    await idle()
    stream.send([cluster("c")])
    await idle()
    stream.send([endpoints("c")])
    async with first:
        assert isinstance(await anext(first), XdsConfig)
    async with client.watch_config("l") as second:
        await idle()
        clock.advance(60)
        await idle()
        snapshot = await anext(second)
        assert isinstance(snapshot, XdsConfig), snapshot
        assert not isinstance(snapshot, DataError)
        assert snapshot.clusters["c"].endpoints is not None


async def test_a_config_watch_gets_an_ambient_error_when_the_server_goes_away(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    async with client.watch_config("l") as configs:
        stream = await fake.stream()
        for resource in (listener("l", route="r"), routes("c", name="r"), cluster("c")):
            stream.send([resource])
            await idle()
        stream.send([endpoints("c")])
        assert isinstance(await anext(configs), XdsConfig)
        fake.refuse("xDS server gone")
        stream.fail()
        warning = await anext(configs)
        assert isinstance(warning, AmbientError)
        assert "xDS server gone" in str(warning.error)
        state = client.resource_state(ENDPOINT, "c")
        assert state is not None
        assert state.status is ResourceStatus.ACKED  # the last snapshot stays in use


async def test_a_config_watch_dropped_without_cancel_warns_and_unsubscribes(
    fake: FakeTransport, clock: FakeClock, client: XdsClient
) -> None:
    def drop() -> None:
        client.watch_config("l")
        gc.collect()

    with pytest.warns(ResourceWarning, match="never cancelled"):
        drop()
    await idle()
    assert client.resource_state(LISTENER, "l") is None
