"""SyncXdsClient against the real test control plane, from plain threads with no event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.builders import cluster, endpoints, listener, routes
from tests.sync.conftest import Plane, until
from xdsclient import (
    AmbientError,
    Available,
    CallbackWatcher,
    ClientClosedError,
    DataError,
    Event,
    Missing,
    ResourceChanged,
    WaitTimeoutError,
    XdsConfig,
)
from xdsclient.resources import CLUSTER, LISTENER
from xdsclient.sync import SyncXdsClient


def timeout_of(view: Any) -> int:
    """The content `cluster(timeout_s=...)` varies."""
    seconds: int = view.proto.connect_timeout.seconds
    return seconds


@pytest.fixture
def client(plane: Plane) -> Iterator[SyncXdsClient]:
    with SyncXdsClient(plane.address, node_id="sync") as sync_client:
        yield sync_client


class Recorder:
    """A sync A88 watcher that records each event and the thread it ran on."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.threads: set[str] = set()

    def on_resource_changed(self, event: Any) -> None:
        self.threads.add(threading.current_thread().name)
        self.events.append(event)

    def on_ambient_error(self, event: AmbientError) -> None:
        self.on_resource_changed(event)

    def timeouts(self) -> list[int]:
        return [timeout_of(e.value) for e in self.events if isinstance(e, ResourceChanged)]


def test_get_waits_for_the_first_value_then_answers_the_latest(
    plane: Plane, client: SyncXdsClient
) -> None:
    """The first get waits for the cluster; once it changes, get answers the new view."""
    plane.set(cluster("a", timeout_s=1))
    view = client.get(CLUSTER, "a")
    assert (view.name, timeout_of(view)) == ("a", 1)
    plane.set(cluster("a", timeout_s=2))
    until(lambda: timeout_of(client.get(CLUSTER, "a")) == 2, what="the new view")


def test_get_reads_a_known_name_without_a_hop_to_the_loop(
    plane: Plane, client: SyncXdsClient
) -> None:
    """Once read, a name stays watched: get answers from the caller's thread, even while the
    loop is busy (here: held by a coroutine that blocks it)."""
    plane.set(cluster("a"))
    first = client.get(CLUSTER, "a")
    held, release = threading.Event(), threading.Event()

    async def hold_the_loop() -> None:
        held.set()
        release.wait(5)  # blocks the loop thread on purpose

    future = client.loop_thread.submit(hold_the_loop())
    held.wait(5)
    try:
        assert client.get(CLUSTER, "a") is first
    finally:
        release.set()
        future.result(5)


def test_get_config_returns_the_latest_complete_snapshot(
    plane: Plane, client: SyncXdsClient
) -> None:
    """get_config waits for the listener's whole configuration, then follows its changes."""
    plane.set(listener("svc"), routes("a"), cluster("a"), endpoints("a"))
    config = client.get_config("svc")
    assert isinstance(config, XdsConfig)
    assert sorted(config.clusters) == ["a"]
    plane.set(routes("a", "b"), cluster("b"), endpoints("b"))
    until(lambda: sorted(client.get_config("svc").clusters) == ["a", "b"], what="cluster b")


def test_get_of_a_name_never_served_raises_wait_timeout_error(
    plane: Plane, client: SyncXdsClient
) -> None:
    """The loop's WaitTimeoutError reaches the caller with its type and names the resource."""
    with pytest.raises(WaitTimeoutError, match="Cluster 'missing'"):
        client.get(CLUSTER, "missing", timeout=0.2)


def test_errors_raised_on_the_loop_reach_the_caller_with_their_type(
    client: SyncXdsClient,
) -> None:
    """A bad type, a bad name and a bad timeout raise what XdsClient raises."""
    with pytest.raises(ValueError, match="unknown resource type"):
        client.get("type.googleapis.com/no.such.Type", "a")
    with pytest.raises(TypeError, match="a resource name is a string"):
        client.add_watcher(CLUSTER, 5, Recorder())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot be empty"):
        client.get_config("")
    with pytest.raises(ValueError, match="positive number"):
        client.get(CLUSTER, "a", timeout=0)


def test_resolve_says_available_or_missing(plane: Plane, client: SyncXdsClient) -> None:
    """resolve answers the async client's outcomes."""
    plane.set(cluster("a"), cluster("b"))
    client.get(CLUSTER, "b")  # watched: its removal reaches the client (SotW CDS)
    found = client.resolve(CLUSTER, "a")
    assert isinstance(found, Available)
    assert found.view.name == "a"
    plane.remove(CLUSTER.type_url, "b")
    until(lambda: isinstance(client.resolve(CLUSTER, "b"), Missing), what="b missing")


def test_callbacks_run_in_order_on_a_dedicated_thread_by_default(
    plane: Plane, client: SyncXdsClient
) -> None:
    """Without an executor a watcher gets a thread of its own, never the loop's."""
    plane.set(cluster("a", timeout_s=1))
    recorder = Recorder()
    client.add_watcher(CLUSTER, "a", recorder)
    until(lambda: recorder.timeouts() == [1], what="the first event")
    plane.set(cluster("a", timeout_s=2))
    until(lambda: recorder.timeouts() == [1, 2], what="the change")
    (thread,) = recorder.threads
    assert thread.startswith("xdsclient-watcher")


def test_callbacks_run_on_the_executor_given(plane: Plane) -> None:
    """An executor given to the client, or to one watcher, is where its callbacks run."""
    plane.set(cluster("a"), listener("svc"), routes("a"), endpoints("a"))
    with (
        concurrent.futures.ThreadPoolExecutor(2, "client-pool") as pool,
        concurrent.futures.ThreadPoolExecutor(1, "watcher-pool") as own,
        SyncXdsClient(plane.address, node_id="sync", executor=pool) as client,
    ):
        shared, alone, configs = Recorder(), Recorder(), Recorder()
        client.add_watcher(CLUSTER, "a", shared)
        client.add_watcher(CLUSTER, "a", alone, executor=own)
        client.add_config_watcher("svc", configs.on_resource_changed)
        until(lambda: shared.events and alone.events and configs.events, what="events")
        assert {t.rsplit("_", 1)[0] for t in shared.threads | configs.threads} == {"client-pool"}
        assert {t.rsplit("_", 1)[0] for t in alone.threads} == {"watcher-pool"}
        assert isinstance(configs.events[0], XdsConfig)


def _raised(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "raised on" in r.getMessage()]


def test_a_raising_watcher_is_logged_and_keeps_its_registration(
    plane: Plane, client: SyncXdsClient, caplog: pytest.LogCaptureFixture
) -> None:
    """A callback that raises is logged by name; it and the others still get every change."""
    plane.set(cluster("a", timeout_s=1))
    calls: list[int] = []

    def explode(event: Event) -> None:
        assert isinstance(event, ResourceChanged)
        calls.append(timeout_of(event.value))
        raise RuntimeError("watcher bug")

    other = Recorder()
    with caplog.at_level(logging.ERROR, "xdsclient.sync"):
        client.add_watcher(CLUSTER, "a", CallbackWatcher(explode))
        client.add_watcher(CLUSTER, "a", other)
        until(lambda: calls == [1] and other.timeouts() == [1], what="the first events")
        plane.set(cluster("a", timeout_s=2))
        until(lambda: calls == [1, 2] and other.timeouts() == [1, 2], what="the change")
        # the callback's thread logs once the exception is out of it, just after its append
        until(lambda: len(_raised(caplog)) == 2, what="the second log record")
    raised = _raised(caplog)
    assert len(raised) == 2
    assert "explode" in raised[0].getMessage()
    assert raised[0].exc_info is not None


def test_a_blocking_watcher_holds_up_nothing_and_gets_the_latest_state(
    plane: Plane, client: SyncXdsClient
) -> None:
    """While one callback blocks, other watchers, get and the stream go on; once it returns
    it receives the latest state of its name (conflated), not a backlog."""
    plane.set(cluster("a", timeout_s=1))
    started, release = threading.Event(), threading.Event()
    blocked: list[int] = []

    def block(event: Event) -> None:
        assert isinstance(event, ResourceChanged)
        blocked.append(timeout_of(event.value))
        started.set()
        release.wait(10)

    other = Recorder()
    client.add_watcher(CLUSTER, "a", CallbackWatcher(block))
    client.add_watcher(CLUSTER, "a", other)
    assert started.wait(5)
    for seconds in (2, 3, 4):
        plane.set(cluster("a", timeout_s=seconds))
        until(lambda: other.timeouts()[-1:] == [seconds], what=f"version {seconds}")  # noqa: B023
    assert timeout_of(client.get(CLUSTER, "a")) == 4
    assert blocked == [1]
    release.set()
    until(lambda: blocked == [1, 4], what="the latest state after the block")


def test_no_callback_starts_once_its_handle_is_cancelled(
    plane: Plane, client: SyncXdsClient
) -> None:
    """cancel() from the callback's own thread: the next change reaches only the others."""
    plane.set(cluster("a", timeout_s=1))
    handles: list[Any] = []
    seen: list[int] = []

    def once(event: Event) -> None:
        assert isinstance(event, ResourceChanged)
        seen.append(timeout_of(event.value))
        handles[0].cancel()

    other = Recorder()
    handles.append(client.add_watcher(CLUSTER, "a", CallbackWatcher(once)))
    client.add_watcher(CLUSTER, "a", other)
    until(lambda: seen == [1] and other.timeouts() == [1], what="the first events")
    assert handles[0].cancelled
    plane.set(cluster("a", timeout_s=2))
    until(lambda: other.timeouts() == [1, 2], what="the change")
    assert seen == [1]


def test_async_watchers_are_refused_at_the_call(client: SyncXdsClient) -> None:
    """A coroutine callback could never run on an executor's thread: TypeError."""

    async def callback(update: object) -> None: ...

    with pytest.raises(TypeError, match="async"):
        client.add_config_watcher("svc", callback)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="async"):
        client.add_watcher(CLUSTER, "a", CallbackWatcher(callback))


def test_watch_iterates_events_until_cancelled_from_another_thread(
    plane: Plane, client: SyncXdsClient
) -> None:
    """watch() is a blocking iterator; cancel from another thread ends a blocked next."""
    plane.set(cluster("a", timeout_s=1))
    got: list[Event] = []
    with client.watch(CLUSTER, "a") as events:
        for event in events:
            got.append(event)
            if len(got) == 1:
                plane.set(cluster("a", timeout_s=2))
            else:
                threading.Timer(0.05, events.cancel).start()  # while next() waits
    assert [timeout_of(e.value) for e in got if isinstance(e, ResourceChanged)] == [1, 2]
    assert events.cancelled


def test_watch_config_iterates_snapshots_and_errors(plane: Plane, client: SyncXdsClient) -> None:
    """watch_config yields the async client's updates: a snapshot, then an error once the
    listener is removed."""
    plane.set(listener("svc"), routes("a"), cluster("a"), endpoints("a"))
    with client.watch_config("svc") as updates:
        first = next(updates)
        assert isinstance(first, XdsConfig)
        plane.remove(LISTENER.type_url, "svc")
        assert not isinstance(next(updates), XdsConfig)


def test_close_is_idempotent_joins_the_loop_thread_and_refuses_later_calls(
    plane: Plane,
) -> None:
    """close twice is fine; the loop thread is gone; reads and watches raise ClientClosedError."""
    plane.set(cluster("a"))
    client = SyncXdsClient(plane.address, node_id="sync")
    client.start()
    client.get(CLUSTER, "a")
    recorder = Recorder()
    handle = client.add_watcher(CLUSTER, "a", recorder)
    thread = client.loop_thread._thread
    assert thread is not None
    assert thread.is_alive()
    client.close()
    client.stop()
    assert not thread.is_alive()
    assert client.closed
    until(lambda: handle.cancelled, what="the watcher ended")
    with pytest.raises(ClientClosedError):
        client.get(CLUSTER, "a")
    with pytest.raises(ClientClosedError):
        client.add_watcher(CLUSTER, "a", Recorder())
    with pytest.raises(RuntimeError, match="starts once"):
        client.start()


def test_close_from_a_callback_does_not_wait_for_itself(plane: Plane) -> None:
    """A watcher may close its client: the close ends without waiting for that callback."""
    plane.set(cluster("a"))
    client = SyncXdsClient(plane.address, node_id="sync").__enter__()
    closed = threading.Event()

    def close(event: Event) -> None:
        client.close()
        closed.set()

    client.add_watcher(CLUSTER, "a", CallbackWatcher(close))
    assert closed.wait(10)
    assert client.closed


def test_waiting_calls_are_refused_inside_a_running_event_loop(client: SyncXdsClient) -> None:
    """In a coroutine, or on the client's own loop, a blocking call raises at once."""

    async def inside() -> None:
        client.get(CLUSTER, "a")

    with pytest.raises(RuntimeError, match="running event loop"):
        asyncio.run(inside())
    with pytest.raises(RuntimeError, match="deadlock"):
        client.run(inside())


def test_a_whole_life_in_a_thread_without_an_event_loop(plane: Plane) -> None:
    """Start, read and close from a fresh thread (none of pytest's loop anywhere)."""
    plane.set(cluster("a"))
    result: list[object] = []

    def life() -> None:
        with SyncXdsClient(plane.address, node_id="sync") as client:
            result.append(client.get(CLUSTER, "a").name)
            result.append(client.stats().servers[plane.address].connected_state)

    thread = threading.Thread(target=life)
    thread.start()
    thread.join(20)
    assert result == ["a", True]


def test_thirty_two_threads_read_and_watch_at_once(plane: Plane, client: SyncXdsClient) -> None:
    """32 threads get, get_config, add and cancel watchers together; every answer is right."""
    plane.set(listener("svc"), routes("a"), cluster("a"), endpoints("a"))
    names = [f"c{i}" for i in range(8)]
    plane.set(*(cluster(name) for name in names))
    barrier = threading.Barrier(32)

    def work(i: int) -> list[str]:
        barrier.wait(10)
        seen = []
        for round_ in range(20):
            name = names[(i + round_) % len(names)]
            seen.append(client.get(CLUSTER, name).name)
            assert sorted(client.get_config("svc").clusters) == ["a"]
        recorder = Recorder()
        handle = client.add_watcher(CLUSTER, names[i % len(names)], recorder)
        until(lambda: recorder.events, what="a watcher's first event")
        handle.cancel()
        return seen

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        results = list(pool.map(work, range(32)))
    for i, seen in enumerate(results):
        assert seen == [names[(i + r) % len(names)] for r in range(20)]


def test_data_errors_leave_get_waiting_for_a_new_value(plane: Plane, client: SyncXdsClient) -> None:
    """A deleted cluster has no value: get waits (and times out naming the deletion)."""
    plane.set(cluster("a"))
    client.get(CLUSTER, "a")
    recorder = Recorder()
    client.add_watcher(CLUSTER, "a", recorder)
    plane.remove(CLUSTER.type_url, "a")
    until(lambda: any(isinstance(e, DataError) for e in recorder.events), what="the deletion")
    with pytest.raises(WaitTimeoutError, match=r"last: DataError.*deleted by the server"):
        client.get(CLUSTER, "a", timeout=0.2)
    plane.set(cluster("a", timeout_s=7))
    assert timeout_of(client.get(CLUSTER, "a")) == 7


def test_close_inside_a_running_loop_is_refused_and_closes_nothing(
    plane: Plane, client: SyncXdsClient
) -> None:
    """close() in a coroutine raises before it closes anything: the client still answers."""
    plane.set(cluster("a"))

    async def inside() -> None:
        client.close()

    with pytest.raises(RuntimeError, match="running event loop"):
        asyncio.run(inside())
    assert not client.closed
    assert client.get(CLUSTER, "a").name == "a"


def test_a_watch_read_after_its_client_closed_just_ends(plane: Plane) -> None:
    """As the async watch's iteration ends when its client closes, so does the sync one's,
    however late it is read."""
    plane.set(cluster("a"))
    with SyncXdsClient(plane.address, node_id="sync") as client:
        events = client.watch(CLUSTER, "a")
        assert isinstance(next(events), ResourceChanged)
    assert list(events) == []


def test_a_name_that_is_not_a_string_gets_the_clients_own_error(client: SyncXdsClient) -> None:
    """get checks nothing itself that the client checks: its TypeError names the mistake."""
    with pytest.raises(TypeError, match="a resource name is a string"):
        client.get(CLUSTER, ["a"])  # type: ignore[arg-type]


def test_metrics_are_exported_from_the_loop_thread(plane: Plane, client: SyncXdsClient) -> None:
    """enable_metrics reports A78's metrics of the client on its loop; stop ends it."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    stop = client.enable_metrics(MeterProvider(metric_readers=[reader]), target="sync")
    plane.set(cluster("a"))
    client.get(CLUSTER, "a")

    def names() -> set[str]:
        data = reader.get_metrics_data()
        if data is None:
            return set()
        return {
            metric.name
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
        }

    until(lambda: "grpc.xds_client.resource_updates_valid" in names(), what="the A78 counter")
    stop()
    client.close()
    stop()  # after close: nothing to stop, and no error
