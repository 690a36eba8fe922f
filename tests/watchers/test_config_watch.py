"""`ConfigWatch` over a small in-test `WatchRegistry`: real resource views decoded from real
protobuf messages, a real dispatcher, no client and no server. What it must do: subscribe to what
the walk needs, publish only complete snapshots that differ, report a resource that holds only an
error as an error snapshot, deliver ambient errors (conflated, once per change) after the
snapshot, run the callback form on one owned task, and end cleanly (cancelled, or dropped with a
warning)."""

from __future__ import annotations

import asyncio
import gc
import logging
import warnings
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

import attrs
import pytest

from tests.builders import cluster, endpoints, listener, routes
from tests.helpers import idle
from xdsclient import (
    AmbientError,
    ConfigUpdate,
    ConfigWatch,
    DataError,
    Event,
    ResourceState,
    ResourceStatus,
    ServerResourceError,
    TransportError,
    XdsConfig,
    XdsError,
)
from xdsclient._errors import ResourceDoesNotExistError
from xdsclient._runtime._tasks import TaskOwner
from xdsclient._watch._dependencies import Resolved, walk
from xdsclient._watch._watchers import Dispatcher, ResourceWatcher, WatchHandle, replay_events
from xdsclient.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE_CONFIGURATION, ResourceType
from xdsclient.testing import FakeClock

ALL = (LISTENER, ROUTE_CONFIGURATION, CLUSTER, ENDPOINT)


class Source:
    """A `WatchRegistry` over a dict of cache states, delivering through a real `Dispatcher`.

    The test changes the "cache" with `set`, `fail` and `warn`; each publishes the events the
    client's core would, in the same step.
    """

    def __init__(self) -> None:
        self.dispatcher = Dispatcher(clock=FakeClock(), on_last_watcher=self._departed)
        self.tasks = TaskOwner()
        self.states: dict[tuple[str, str], ResourceState] = {}
        self.watched: set[tuple[str, str]] = set()
        self.lookups: list[tuple[str, str]] = []
        self._held: list[Event] | None = None

    @contextmanager
    def one_batch(self) -> Iterator[None]:
        """Publish every change made in the block as one batch, as one response would."""
        self._held = []
        yield
        events, self._held = self._held, None
        self.dispatcher.publish(events)

    def _publish(self, events: list[Event]) -> None:
        if self._held is not None:
            self._held.extend(events)
        else:
            self.dispatcher.publish(events)

    # -- the WatchRegistry protocol

    def add_watchers(
        self, type_url: str, names: Sequence[str], watcher: ResourceWatcher
    ) -> list[WatchHandle]:
        return [self._add_watcher(type_url, name, watcher) for name in names]

    def _add_watcher(self, type_url: str, name: str, watcher: ResourceWatcher) -> WatchHandle:
        key = (type_url, name)
        self.watched.add(key)
        state = self.states.get(key)
        replay = replay_events(state) if state is not None else []
        return self.dispatcher.add(type_url, name, watcher, replay)

    def resource_state(
        self, resource_type: ResourceType[Any] | str, name: str
    ) -> ResourceState | None:
        self.lookups.append((_url(resource_type), name))
        return self.states.get((_url(resource_type), name))

    def resource_lookup(self, type_url: str) -> Callable[[str], ResourceState | None]:
        return partial(self.resource_state, type_url)

    def resource_states(self, type_url: str, names: list[str]) -> list[Resolved | None]:
        return [self.resource_state(type_url, name) for name in names]

    def start_task(self, coro: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
        return self.tasks.start(coro, name=name)

    # -- the test's side

    def _departed(self, type_url: str, name: str) -> None:
        self.watched.discard((type_url, name))

    def set(self, *messages: Any) -> None:
        """Cache valid values (each message's type is found by trying the decoders)."""
        events = []
        for message in messages:
            rtype = next(t for t in ALL if t.type_url.endswith(message.DESCRIPTOR.full_name))
            name, view = rtype.decode(message.SerializeToString())
            state = ResourceState(
                type_url=rtype.type_url,
                name=name,
                status=ResourceStatus.ACKED,
                value=view,
                version="1",
                last_updated=0.0,
                error=None,
                error_time=None,
                expires_at=None,
            )
            self.states[(rtype.type_url, name)] = state
            events.extend(replay_events(state))
        self._publish(events)

    def fail(self, rtype: ResourceType[Any], name: str, error: XdsError) -> None:
        """The resource has no usable value any more, only ``error``."""
        self.states[(rtype.type_url, name)] = ResourceState(
            type_url=rtype.type_url,
            name=name,
            status=ResourceStatus.DOES_NOT_EXIST,
            value=None,
            version=None,
            last_updated=None,
            error=error,
            error_time=0.0,
            expires_at=None,
        )
        self._publish([DataError(type_url=rtype.type_url, name=name, error=error)])

    def warn(self, rtype: ResourceType[Any], name: str, error: XdsError) -> None:
        """Something failed that leaves the cached value usable."""
        key = (rtype.type_url, name)
        self.states[key] = attrs.evolve(
            self.states[key], status=ResourceStatus.RECEIVED_ERROR_BUT_CACHED, error=error
        )
        self._publish([AmbientError(type_url=rtype.type_url, name=name, error=error)])


def _url(resource_type: ResourceType[Any] | str) -> str:
    return resource_type if isinstance(resource_type, str) else resource_type.type_url


@pytest.fixture
async def source() -> AsyncIterator[Source]:
    source = Source()
    source.tasks.start(source.dispatcher.run(), name="xdsclient-test-dispatcher")
    yield source
    source.dispatcher.close()
    async with asyncio.timeout(5):
        await source.tasks.close()


GRAPH = (listener("l", route="r"), routes("c", name="r"), cluster("c"), endpoints("c"))


async def next_update(watch: ConfigWatch) -> ConfigUpdate:
    async with asyncio.timeout(5):  # a bound on a bug, never reached when the rule holds
        return await anext(watch)


async def next_snapshot(watch: ConfigWatch) -> XdsConfig:
    """The next update, which must be a snapshot."""
    update = await next_update(watch)
    assert isinstance(update, XdsConfig), update
    return update


async def next_warning(watch: ConfigWatch) -> AmbientError:
    """The next update, which must be an ambient error."""
    update = await next_update(watch)
    assert isinstance(update, AmbientError), update
    return update


async def test_one_complete_snapshot_once_every_needed_resource_is_resolved(
    source: Source,
) -> None:
    async with ConfigWatch(source, "l", "l") as watch:
        assert source.watched == {(LISTENER.type_url, "l")}
        for message in GRAPH:  # each step widens what is needed; none is complete before the end
            source.set(message)
            await idle()
        assert source.watched == {
            (LISTENER.type_url, "l"),
            (ROUTE_CONFIGURATION.type_url, "r"),
            (CLUSTER.type_url, "c"),
            (ENDPOINT.type_url, "c"),
        }
        snapshot = await next_snapshot(watch)
        assert snapshot.clusters["c"].endpoints is not None
        source.set(*GRAPH)  # the same content again publishes nothing
        await idle()
        source.set(routes("c", "d", name="r"))  # needs d: incomplete, so nothing is published
        await idle()
        assert (CLUSTER.type_url, "d") in source.watched
        source.set(routes("c", name="r"))  # back to the published snapshot: nothing again
        await idle()
        assert (CLUSTER.type_url, "d") not in source.watched  # what is not needed is dropped
        source.set(endpoints("c", port=9090))
        newer = await next_update(watch)  # the very next update is the changed snapshot
        assert isinstance(newer, XdsConfig)
        assert newer != snapshot


async def test_a_batch_of_changes_is_walked_once_after_the_batch(source: Source) -> None:
    source.set(*GRAPH)
    async with ConfigWatch(source, "l", "l") as watch:
        await next_snapshot(watch)
        source.lookups.clear()
        source.set(cluster("c", timeout_s=9), endpoints("c", port=9090), listener("l", route="r"))
        await idle()
        assert source.lookups.count((LISTENER.type_url, "l")) == 1
        await next_snapshot(watch)


async def test_an_endpoints_only_batch_redoes_only_its_clusters_and_matches_a_full_walk(
    source: Source,
) -> None:
    source.set(listener("l", route="r"), routes("c", "d", name="r"), cluster("c"), cluster("d"))
    source.set(endpoints("c"), endpoints("d"))
    async with ConfigWatch(source, "l", "l") as watch:
        first = await next_update(watch)
        assert isinstance(first, XdsConfig)
        await idle()  # the replays of the new subscriptions, walked
        source.lookups.clear()
        source.set(endpoints("d", port=9090))
        second = await next_update(watch)
        assert isinstance(second, XdsConfig)
        assert source.lookups == [(ENDPOINT.type_url, "d")]  # no walk from the listener
        assert second.clusters["c"] is first.clusters["c"]
        assert second == walk("l", "l", source.resource_state).config
        deleted = ResourceDoesNotExistError(ENDPOINT.type_url, "c", "deleted")
        source.fail(ENDPOINT, "c", deleted)
        third = await next_update(watch)
        assert isinstance(third, XdsConfig)
        assert third.clusters["c"].endpoints_error is deleted
        source.set(cluster("d", timeout_s=9))  # anything else: a walk from the listener again
        fourth = await next_update(watch)
        assert isinstance(fourth, XdsConfig)
        assert (LISTENER.type_url, "l") in source.lookups
        assert fourth.clusters["c"] is third.clusters["c"]  # unchanged views: reused entries


async def test_a_needed_resource_holding_only_an_error_gives_an_error_snapshot(
    source: Source,
) -> None:
    error = ServerResourceError(ROUTE_CONFIGURATION.type_url, "r", "denied", code=7)
    source.set(listener("l", route="r"))
    source.fail(ROUTE_CONFIGURATION, "r", error)
    async with ConfigWatch(source, "l", "l") as watch:
        assert await next_update(watch) is error


async def test_a_data_error_for_a_needed_resource_replaces_the_snapshot_with_the_error(
    source: Source,
) -> None:
    source.set(*GRAPH)
    async with ConfigWatch(source, "l", "l") as watch:
        await next_snapshot(watch)
        deleted = ResourceDoesNotExistError(LISTENER.type_url, "l", "deleted")
        source.fail(LISTENER, "l", deleted)
        assert await next_update(watch) is deleted


async def test_an_ambient_error_follows_the_snapshot_and_only_the_latest_waits(
    source: Source,
) -> None:
    source.set(*GRAPH)
    async with ConfigWatch(source, "l", "l") as watch:
        source.warn(CLUSTER, "c", TransportError("first"))
        source.warn(ENDPOINT, "c", TransportError("second"))
        await idle()
        await next_snapshot(watch)  # the snapshot first
        warning = await next_warning(watch)
        assert str(warning.error) == "second"  # the latest replaced the earlier one


async def test_a_new_snapshot_drops_a_waiting_ambient_error_and_comes_first(
    source: Source,
) -> None:
    source.set(*GRAPH)
    async with ConfigWatch(source, "l", "l") as watch:
        await next_snapshot(watch)
        source.warn(ENDPOINT, "c", TransportError("stale"))
        await idle()  # the warning waits for the consumer
        source.set(endpoints("c", port=9090))
        await idle()
        await next_snapshot(watch)
        source.warn(CLUSTER, "c", TransportError("fresh"))
        warning = await next_warning(watch)
        assert str(warning.error) == "fresh"


async def test_an_ambient_error_followed_in_its_batch_by_a_change_of_its_resource_is_dropped(
    source: Source,
) -> None:
    source.set(*GRAPH)
    async with ConfigWatch(source, "l", "l") as watch:
        await next_snapshot(watch)
        with source.one_batch():
            source.warn(ENDPOINT, "c", TransportError("stale"))
            source.set(endpoints("c", port=9090))
        await next_snapshot(watch)
        source.warn(CLUSTER, "c", TransportError("fresh"))
        warning = await next_warning(watch)
        assert str(warning.error) == "fresh"


async def test_an_ambient_error_in_the_batch_that_changes_the_snapshot_comes_after_it(
    source: Source,
) -> None:
    source.set(*GRAPH)
    async with ConfigWatch(source, "l", "l") as watch:
        await next_snapshot(watch)
        with source.one_batch():  # as when a reconnect fails: some errors ambient, some not
            source.warn(LISTENER, "l", TransportError("unreachable"))
            source.fail(ENDPOINT, "c", TransportError("unreachable"))
        snapshot = await next_snapshot(watch)
        assert snapshot.clusters["c"].endpoints_error is not None
        warning = await next_warning(watch)
        assert warning.name == "l"


async def test_an_ambient_error_before_the_first_complete_snapshot_follows_it(
    source: Source,
) -> None:
    source.set(*GRAPH[:3])
    async with ConfigWatch(source, "l", "l") as watch:
        with source.one_batch():
            source.warn(CLUSTER, "c", TransportError("unreachable"))
            source.fail(ENDPOINT, "c", TransportError("unreachable"))
        await next_snapshot(watch)
        warning = await next_warning(watch)
        assert warning.name == "c"


async def test_an_ambient_error_while_nothing_was_published_is_not_delivered(
    source: Source,
) -> None:
    source.set(*GRAPH[:3])  # no endpoints yet: no snapshot
    async with ConfigWatch(source, "l", "l") as watch:
        reader = asyncio.ensure_future(next_update(watch))
        source.warn(CLUSTER, "c", TransportError("no snapshot to warn about"))
        await idle()
        assert not reader.done()
        source.set(endpoints("c"))
        assert isinstance(await reader, XdsConfig)


async def test_an_ambient_error_equal_to_the_last_delivered_is_not_delivered_again(
    source: Source,
) -> None:
    """The same resource failing the same way again (a retry) is no news; another error is."""
    source.set(*GRAPH)
    async with ConfigWatch(source, "l", "l") as watch:
        await next_snapshot(watch)
        source.warn(CLUSTER, "c", TransportError("unreachable"))
        await next_warning(watch)
        reader = asyncio.ensure_future(next_update(watch))
        for _ in range(3):
            source.warn(CLUSTER, "c", TransportError("unreachable"))
            await idle()
        assert not reader.done()
        source.warn(CLUSTER, "c", TransportError("refused"))
        warning = await reader
        assert isinstance(warning, AmbientError)
        assert str(warning.error) == "refused"


async def test_a_change_of_the_warned_resource_makes_the_same_error_news_again(
    source: Source,
) -> None:
    """Once the resource an ambient error was about changes, the same error is delivered again."""
    source.set(*GRAPH)
    async with ConfigWatch(source, "l", "l") as watch:
        await next_snapshot(watch)
        source.warn(ENDPOINT, "c", TransportError("unreachable"))
        await next_warning(watch)
        source.set(endpoints("c", port=9090))
        await next_snapshot(watch)
        source.warn(ENDPOINT, "c", TransportError("unreachable"))
        warning = await next_warning(watch)
        assert str(warning.error) == "unreachable"


async def test_cancel_ends_iteration_and_drops_every_subscription(source: Source) -> None:
    source.set(*GRAPH)
    watch = ConfigWatch(source, "l", "l")
    await next_snapshot(watch)
    reader = asyncio.ensure_future(anext(watch))
    await idle()
    watch.cancel()
    with pytest.raises(StopAsyncIteration):
        await reader
    await idle()
    assert source.watched == set()
    source.set(endpoints("c", port=9090))  # nothing more is walked or delivered
    await idle()
    assert [update async for update in watch] == []


async def test_cancel_drops_a_snapshot_still_waiting_for_the_consumer(source: Source) -> None:
    source.set(*GRAPH)
    async with ConfigWatch(source, "l", "l") as watch:
        source.warn(CLUSTER, "c", TransportError("flaky"))
        await idle()
    assert [update async for update in watch] == []


async def test_the_callback_form_runs_on_one_owned_task_and_survives_a_failing_call(
    source: Source, caplog: pytest.LogCaptureFixture
) -> None:
    got: list[ConfigUpdate] = []

    async def callback(update: ConfigUpdate) -> None:
        got.append(update)
        if len(got) == 1:
            raise ValueError("bug in the callback")
        if len(got) == 2:
            raise asyncio.CancelledError  # its own, not the task's: contained too

    source.set(*GRAPH)
    watch = ConfigWatch(source, "l", "l", callback)
    assert len(source.tasks) == 2  # the dispatcher's, and the callback's
    await idle()
    source.set(endpoints("c", port=9090))
    await idle()
    source.warn(CLUSTER, "c", TransportError("flaky"))
    await idle()
    assert [type(update) for update in got] == [XdsConfig, XdsConfig, AmbientError]
    assert "bug in the callback" in caplog.text
    assert "raised CancelledError" in caplog.text
    watch.cancel()
    await idle()
    assert len(source.tasks) == 1  # cancel ended the callback's task


async def test_cancel_ends_the_callback_task_even_while_a_callback_is_running(
    source: Source,
) -> None:
    running = asyncio.Event()

    async def hangs(update: ConfigUpdate) -> None:
        running.set()
        await asyncio.Event().wait()

    source.set(*GRAPH)
    watch = ConfigWatch(source, "l", "l", hangs)
    await running.wait()
    watch.cancel()
    await idle()
    assert len(source.tasks) == 1  # only the dispatcher's is left


async def test_a_plain_callback_gets_every_update_in_order(source: Source) -> None:
    got: list[ConfigUpdate] = []
    source.set(*GRAPH)
    watch = ConfigWatch(source, "l", "l", got.append)
    await idle()
    source.fail(CLUSTER, "c", ResourceDoesNotExistError(CLUSTER.type_url, "c", "gone"))
    await idle()
    watch.cancel()
    assert len(got) == 2
    first, second = got
    assert isinstance(first, XdsConfig)
    assert isinstance(second, XdsConfig)
    assert second.clusters["c"].error is not None  # reported for that cluster alone


async def test_a_dropped_config_watch_unsubscribes_and_warns_resource_warning(
    source: Source,
) -> None:
    source.set(*GRAPH)

    def watch_and_forget() -> None:
        watch = ConfigWatch(source, "l", "l")
        assert source.watched
        del watch
        gc.collect()

    with pytest.warns(ResourceWarning, match="never cancelled"):
        watch_and_forget()
    assert source.watched == set()


async def test_a_failing_callback_is_logged_by_the_watch_not_by_the_task_owner(
    source: Source, caplog: pytest.LogCaptureFixture
) -> None:
    def callback(update: ConfigUpdate) -> None:
        raise RuntimeError("boom")

    source.set(*GRAPH)
    with caplog.at_level(logging.ERROR, logger="xdsclient"):
        watch = ConfigWatch(source, "l", "l", callback)
        await idle()
    watch.cancel()
    assert [r.getMessage().split(" raised")[0] for r in caplog.records] == [
        f"xDS config watcher {callback!r}"
    ]


async def test_a_config_watch_that_fails_to_start_drops_its_subscriptions_without_a_warning(
    source: Source,
) -> None:
    def refuse(coro: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
        coro.close()
        raise RuntimeError("the XdsClient is closed")

    source.set(*GRAPH)
    source.start_task = refuse  # type: ignore[method-assign]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="closed"):
            ConfigWatch(source, "l", "l", print)
        gc.collect()
    assert caught == []
    assert source.watched == set()
