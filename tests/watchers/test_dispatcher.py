"""The dispatcher on its own: who receives which batch, in what order, and what user code cannot
break (raising, hanging, running slow). Real events, a fake clock, no waiting."""

from __future__ import annotations

import asyncio
import gc
import logging
import tracemalloc
import weakref

import pytest

from tests.helpers import idle
from tests.watchers.helpers import CDS, EDS, ambient, changed, missing, running
from xdsclient import CallbackWatcher, Event, WatchHandle
from xdsclient._watch._watchers import (
    ACK_FIRST_LIMIT,
    BatchFeeder,
    Dispatcher,
    Watch,
    check_watcher,
)
from xdsclient.testing import FakeClock


def _recorder() -> tuple[list[Event], CallbackWatcher]:
    seen: list[Event] = []
    return seen, CallbackWatcher(seen.append)


class _Feeder(BatchFeeder):
    """A watcher of the client's own kind: records each hand-over (a list of events)."""

    def __init__(self, log: list[object]) -> None:
        self.log = log

    def on_batch(self, events: list[Event]) -> None:
        self.log.append([event.name for event in events])


async def test_a_feeder_takes_every_event_of_a_batch_for_its_names_in_one_call_in_order() -> None:
    dispatcher = Dispatcher(clock=FakeClock())
    calls: list[object] = []
    feeder = _Feeder(calls)
    for name in ("a", "b", "c"):
        dispatcher.add(EDS, name, feeder, ())
    batch = [changed("a", "1"), changed("b", "1"), changed("x", "1"), changed("c", "1")]
    done = dispatcher.publish([*batch, ambient("a")])
    assert done is not None
    async with running(dispatcher):
        await done
    assert calls == [["a", "b", "c", "a"]]  # one call for the response, not one per resource


async def test_a_feeder_gets_what_came_before_an_async_callback_before_it_is_awaited() -> None:
    dispatcher = Dispatcher(clock=FakeClock())
    order: list[object] = []
    gate = asyncio.Event()

    async def slow(event: Event) -> None:
        order.append(event.name)
        await gate.wait()

    feeder = _Feeder(order)
    dispatcher.add(EDS, "a", feeder, ())
    dispatcher.add(EDS, "b", CallbackWatcher(slow), ())
    dispatcher.add(EDS, "c", feeder, ())
    done = dispatcher.publish([changed("a", "1"), changed("b", "1"), changed("c", "1")])
    assert done is not None
    async with running(dispatcher):
        await idle()
        assert order == [["a"], "b"]  # "a" was handed over before the callback's wait
        gate.set()
        await done
    assert order == [["a"], "b", ["c"]]


async def test_a_new_watcher_gets_its_replay_then_only_batches_published_after_it() -> None:
    dispatcher = Dispatcher(clock=FakeClock())
    old, old_watcher = _recorder()
    dispatcher.add(EDS, "a", old_watcher, ())
    first = dispatcher.publish([changed("a", "1")])
    new, new_watcher = _recorder()
    dispatcher.add(EDS, "a", new_watcher, [changed("a", "1")])  # the cache already holds v1
    second = dispatcher.publish([changed("a", "2")])
    assert first is not None
    assert second is not None
    async with running(dispatcher):
        await second
    assert first.done()
    assert old == [changed("a", "1"), changed("a", "2")]
    assert new == [changed("a", "1"), changed("a", "2")]  # v1 once, from the replay


async def test_watchers_added_at_once_get_their_own_replays_then_only_later_batches() -> None:
    dispatcher = Dispatcher(clock=FakeClock())
    before = dispatcher.publish([changed("a", "1")])
    seen, watcher = _recorder()
    cached: dict[str, list[Event]] = {"b": [changed("b", "1")]}
    handles = dispatcher.add_all(EDS, ["a", "b", "c"], watcher, lambda t, n: cached.get(n, []))
    after = dispatcher.publish([changed("c", "2"), changed("a", "2")])
    assert before is not None
    assert after is not None
    async with running(dispatcher):
        await after
    assert [h.cancelled for h in handles] == [False, False, False]
    assert seen == [changed("b", "1"), changed("c", "2"), changed("a", "2")]


async def test_publish_completes_once_every_watcher_was_called_and_returns_none_for_nothing() -> (
    None
):
    dispatcher = Dispatcher(clock=FakeClock())
    gate = asyncio.Event()
    calls: list[str] = []

    async def slow(event: Event) -> None:
        await gate.wait()
        calls.append("slow")

    dispatcher.add(EDS, "a", CallbackWatcher(slow), ())
    dispatcher.add(EDS, "a", CallbackWatcher(lambda event: calls.append("fast")), ())
    assert dispatcher.publish([]) is None
    done = dispatcher.publish([changed("a", "1")])
    assert done is not None
    async with running(dispatcher):
        await idle()
        assert not done.done()  # the first watcher still holds the batch
        assert calls == []  # and the second waits its turn: one at a time, in order
        gate.set()
        await done
        assert calls == ["slow", "fast"]


async def test_a_wildcard_watcher_gets_every_event_of_its_type_and_no_other() -> None:
    dispatcher = Dispatcher(clock=FakeClock())
    seen, watcher = _recorder()
    dispatcher.add(EDS, "*", watcher, ())
    done = dispatcher.publish([changed("a", "1"), changed("x", "1", CDS), missing("b")])
    assert done is not None
    async with running(dispatcher):
        await done
    assert seen == [changed("a", "1"), missing("b")]


async def test_a_watcher_that_raises_is_logged_and_the_others_still_get_the_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dispatcher = Dispatcher(clock=FakeClock())

    error = ValueError("bug in user code")

    def broken(event: Event) -> None:
        raise error

    seen, watcher = _recorder()
    dispatcher.add(EDS, "a", CallbackWatcher(broken), ())
    dispatcher.add(EDS, "a", watcher, ())
    done = dispatcher.publish([changed("a", "1"), changed("a", "2")])
    assert done is not None
    async with running(dispatcher):
        await done
    assert seen == [changed("a", "1"), changed("a", "2")]
    failures = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.exc_info[1] for r in failures if r.exc_info] == [error, error]
    assert all("broken raised on ResourceChanged" in r.getMessage() for r in failures)


@pytest.mark.parametrize("kind", ["plain", "async"])
async def test_a_callback_raising_cancelled_error_of_its_own_is_contained_like_any_failure(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    dispatcher = Dispatcher(clock=FakeClock())

    def plain(event: Event) -> None:
        raise asyncio.CancelledError

    async def in_a_coroutine(event: Event) -> None:
        raise asyncio.CancelledError

    seen, watcher = _recorder()
    dispatcher.add(EDS, "a", CallbackWatcher(plain if kind == "plain" else in_a_coroutine), ())
    dispatcher.add(EDS, "a", watcher, ())
    first = dispatcher.publish([changed("a", "1")])
    second = dispatcher.publish([changed("a", "2")])
    assert first is not None
    assert second is not None
    async with running(dispatcher) as serializer:
        async with asyncio.timeout(5):
            await second
        assert not serializer.done()  # the serializer outlives the callback's CancelledError
    assert seen == [changed("a", "1"), changed("a", "2")]
    assert "raised CancelledError" in caplog.text


async def test_cancelling_the_serializer_returns_at_once_while_a_callback_swallows_it() -> None:
    dispatcher = Dispatcher(clock=FakeClock())
    release = asyncio.Event()
    called = asyncio.Event()

    async def stubborn(event: Event) -> None:
        called.set()
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue  # swallows every cancellation until the test releases it

    dispatcher.add(EDS, "a", CallbackWatcher(stubborn), ())
    dispatcher.publish([changed("a", "1")])
    serializer = asyncio.ensure_future(dispatcher.run())
    try:
        await called.wait()
        serializer.cancel()
        _, pending = await asyncio.wait((serializer,), timeout=2)  # a bound, not a wait: it
        assert not pending  # returns at once when the rule holds
        assert serializer.cancelled()
    finally:
        release.set()
        await idle()


async def test_a_slow_callback_is_logged_once_naming_it_its_type_and_resource(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    dispatcher = Dispatcher(clock=clock, slow_threshold=1.5)
    gate = asyncio.Event()

    async def rebuild_pool(event: Event) -> None:
        await gate.wait()

    async def quick(event: Event) -> None:
        pass

    dispatcher.add(EDS, "pool-a", CallbackWatcher(quick), ())
    dispatcher.add(EDS, "pool-a", CallbackWatcher(rebuild_pool), ())
    done = dispatcher.publish([changed("pool-a", "1")])
    assert done is not None
    with caplog.at_level(logging.WARNING, logger="xdsclient"):
        async with running(dispatcher):
            await idle()
            clock.advance(1.49)  # not yet past the threshold
            await idle()
            assert caplog.records == []
            clock.advance(0.02)
            await idle()
            clock.advance(10)
            await idle()
            gate.set()
            await done
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "rebuild_pool" in record.getMessage()
    assert "ClusterLoadAssignment 'pool-a'" in record.getMessage()


async def test_a_sync_callback_over_the_threshold_is_logged_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    dispatcher = Dispatcher(clock=clock, slow_threshold=1.0)

    def blocking_work(event: Event) -> None:
        clock.advance(5)  # as if it had blocked the loop for five seconds

    dispatcher.add(EDS, "a", CallbackWatcher(blocking_work), ())
    with caplog.at_level(logging.WARNING, logger="xdsclient"):
        async with running(dispatcher):
            done = dispatcher.publish([changed("a", "1")])
            assert done is not None
            await done
    assert "blocking_work has run for more than 1 s" in caplog.text


async def test_close_ends_every_watch_and_later_registrations_fail_clearly() -> None:
    dispatcher = Dispatcher(clock=FakeClock())
    watch = Watch()
    feeder = watch._watcher()
    watch._attach(dispatcher.add(EDS, "a", feeder, (), on_close=feeder.closed))
    reader = asyncio.ensure_future(anext(watch))
    await idle()
    dispatcher.close()
    with pytest.raises(StopAsyncIteration):
        async with asyncio.timeout(5):
            await reader
    assert watch.cancelled
    assert dispatcher.publish([changed("a", "1")]) is None
    with pytest.raises(RuntimeError, match="the XdsClient is closed"):
        dispatcher.add(EDS, "a", CallbackWatcher(print), ())


async def test_close_completes_the_futures_of_undelivered_batches_without_cancelling_them() -> None:
    dispatcher = Dispatcher(clock=FakeClock())
    dispatcher.add(EDS, "a", CallbackWatcher(print), ())
    done = dispatcher.publish([changed("a", "1")])
    assert done is not None
    dispatcher.close()
    assert done.done()
    assert not done.cancelled()  # awaiting it does not raise CancelledError in the publisher


async def test_only_the_last_watcher_of_a_name_to_leave_is_reported() -> None:
    departed: list[tuple[str, str]] = []
    dispatcher = Dispatcher(clock=FakeClock(), on_last_watcher=lambda *key: departed.append(key))
    first = dispatcher.add(EDS, "a", CallbackWatcher(print), ())
    second = dispatcher.add(EDS, "a", CallbackWatcher(print), ())
    first.cancel()
    assert departed == []
    second.cancel()
    second.cancel()  # idempotent
    assert departed == [(EDS, "a")]


async def test_a_leaving_watcher_takes_only_its_own_registration_of_that_type_and_name() -> None:
    departed: list[tuple[str, str]] = []
    dispatcher = Dispatcher(clock=FakeClock(), on_last_watcher=lambda *key: departed.append(key))
    recorders = [_recorder() for _ in range(4)]
    first, middle, last = (dispatcher.add(EDS, "a", watcher, ()) for _, watcher in recorders[:3])
    dispatcher.add(CDS, "a", recorders[3][1], ())  # same name, other type
    middle.cancel()
    assert middle.cancelled
    assert not first.cancelled
    done = dispatcher.publish([changed("a", "1"), changed("a", "2", type_url=CDS)])
    assert done is not None
    async with running(dispatcher):
        await done
    assert [len(seen) for seen, _ in recorders] == [1, 0, 1, 1]
    first.cancel()
    last.cancel()
    assert departed == [(EDS, "a")]


async def test_closing_marks_every_handle_cancelled_and_a_later_cancel_reports_nothing() -> None:
    departed: list[tuple[str, str]] = []
    dispatcher = Dispatcher(clock=FakeClock(), on_last_watcher=lambda *key: departed.append(key))
    handle = dispatcher.add(EDS, "a", CallbackWatcher(print), ())
    dispatcher.close()
    assert handle.cancelled
    handle.cancel()
    assert departed == []


async def test_a_watcher_cancelled_by_another_in_mid_batch_is_not_called_again() -> None:
    dispatcher = Dispatcher(clock=FakeClock())
    seen, watcher = _recorder()
    queued, queued_watcher = _recorder()
    handles: list[WatchHandle] = []
    dispatcher.add(EDS, "a", CallbackWatcher(lambda event: handles[0].cancel()), ())
    handles.append(dispatcher.add(EDS, "a", watcher, ()))
    handles.append(dispatcher.add(EDS, "a", queued_watcher, ()))
    done = dispatcher.publish([changed("a", "1"), ambient("a")])
    handles[1].cancel()  # cancelled with the batch already queued
    assert done is not None
    async with running(dispatcher):
        await done
    assert seen == []
    assert queued == []


def test_a_watcher_without_the_a88_methods_is_refused_at_the_call_naming_what_it_lacks() -> None:
    class OnlyChanges:
        def on_resource_changed(self, event: Event) -> None:
            pass

    with pytest.raises(TypeError, match=r"callable on_ambient_error;.*OnlyChanges"):
        check_watcher(OnlyChanges())
    with pytest.raises(TypeError, match="on_resource_changed and on_ambient_error"):
        check_watcher(lambda event: None)
    check_watcher(CallbackWatcher(print))


async def test_a_batch_waits_for_its_ack_within_the_bound_and_is_dropped_if_closed_meanwhile() -> (
    None
):
    clock = FakeClock()
    dispatcher = Dispatcher(clock=clock)
    seen, watcher = _recorder()
    dispatcher.add(EDS, "a", watcher, ())
    written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    done = dispatcher.publish([changed("a", "1")], written)
    assert done is not None
    async with running(dispatcher) as task:
        await idle()
        assert seen == []  # the ACK is not written yet
        clock.advance(ACK_FIRST_LIMIT)
        await done
        assert seen == [changed("a", "1")]  # the bound passed: delivered anyway
        stuck: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        dispatcher.publish([changed("a", "2")], stuck)
        await idle()
        dispatcher.close()
        stuck.set_result(None)
        await idle()
        assert not task.done()  # the serializer went on past the batch close() dropped
    assert seen == [changed("a", "1")]


async def test_a_delivered_batch_is_let_go_before_the_next_one_comes() -> None:
    """Once its events are delivered, the dispatcher keeps no reference to them."""
    dispatcher = Dispatcher(clock=FakeClock())
    seen, watcher = _recorder()
    dispatcher.add(EDS, "a", watcher, ())
    event = changed("a", "1")
    gone = weakref.ref(event)
    done = dispatcher.publish([event])
    assert done is not None
    async with running(dispatcher):
        await done
        await idle()
        seen.clear()
        del event
        gc.collect()
        assert gone() is None


def test_registering_a_walks_names_costs_at_most_its_budget_per_name() -> None:
    """A name with one watcher holds its handle alone (no tuple): `add_all` of 2,000 names
    allocates at most 140 bytes each (130 in CPython 3.11: a handle and its dict slot; 178 with
    a 1-tuple each)."""
    dispatcher = Dispatcher(clock=FakeClock())
    _, watcher = _recorder()
    names = [f"cluster-{i}" for i in range(2_000)]
    gc.collect()
    tracemalloc.start()
    try:
        handles = dispatcher.add_all(EDS, names, watcher, lambda type_url, name: [])
        used = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert used / len(names) <= 140, used / len(names)
    handles[0].cancel()
    dispatcher.add(EDS, names[1], watcher, ())
    assert len(handles) == len(names)


async def test_watchers_added_at_once_ask_only_the_cached_names_for_a_replay() -> None:
    """``cached``: the names that can have a replay; the others are not asked (a walk's new
    names are mostly not cached yet), and every handle is still registered."""
    dispatcher = Dispatcher(clock=FakeClock())
    asked: list[str] = []

    def replay(type_url: str, name: str) -> list[Event]:
        asked.append(name)
        return [changed(name, "1")]

    log: list[object] = []
    handles = dispatcher.add_all(EDS, ["a", "b", "c", "d"], _Feeder(log), replay, {"b", "d"})
    done = dispatcher.publish([changed(name, "2") for name in "abcd"])
    assert done is not None
    async with running(dispatcher):
        await done
    assert asked == ["b", "d"]
    assert [h.cancelled for h in handles] == [False] * 4
    assert log == [["b"], ["d"], ["a", "b", "c", "d"]]


async def test_watchers_added_at_once_join_a_name_registered_before_or_given_twice() -> None:
    """A name already watched, or named twice in one call, keeps every registration: each
    handle receives the batch, and cancelling one leaves the others."""
    dispatcher = Dispatcher(clock=FakeClock())
    seen, watcher = _recorder()
    dispatcher.add(EDS, "a", watcher, ())
    handles = dispatcher.add_all(EDS, ["a", "b", "b"], watcher, lambda t, n: [])
    handles[1].cancel()
    done = dispatcher.publish([changed("a", "1"), changed("b", "1")])
    assert done is not None
    async with running(dispatcher):
        await done
    assert seen == [changed("a", "1"), changed("a", "1"), changed("b", "1")]


async def test_a_feeder_and_a_wildcard_callback_each_get_a_batch_in_order() -> None:
    """With a wildcard watcher of the type, the feeder of each name still takes its events in
    one call and the wildcard's callback sees every event, in order; a handle added after
    the batch was published gets none of it."""
    dispatcher = Dispatcher(clock=FakeClock())
    log: list[object] = []
    feeder = _Feeder(log)
    dispatcher.add_all(CDS, ["a", "b"], feeder, lambda t, n: [])
    seen, wildcard = _recorder()
    dispatcher.add(CDS, "*", wildcard, ())
    done = dispatcher.publish([changed("a", "1", CDS), changed("b", "1", CDS)])
    late_log: list[object] = []
    late = _Feeder(late_log)
    dispatcher.add_all(CDS, ["c"], late, lambda t, n: [])
    assert done is not None
    async with running(dispatcher):
        await done
    assert log == [["a", "b"]]
    assert [event.name for event in seen] == ["a", "b"]
    assert late_log == []
