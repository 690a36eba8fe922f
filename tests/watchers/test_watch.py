"""The async-iterator `Watch` over a real dispatcher: it conflates, never blocks delivery, ends
when cancelled or closed, and a dropped one unsubscribes with a `ResourceWarning`."""

from __future__ import annotations

import asyncio
import gc
import warnings

import pytest

from tests.helpers import idle
from tests.watchers.helpers import EDS, ambient, changed, missing, running
from xdsclient import CallbackWatcher, Event
from xdsclient._watch._watchers import Dispatcher, Watch
from xdsclient.testing import FakeClock


def _watch(dispatcher: Dispatcher, name: str = "a", replay: list[Event] | None = None) -> Watch:
    """What `XdsClient.watch` does, without a client."""
    watch = Watch()
    feeder = watch._watcher()
    watch._attach(dispatcher.add(EDS, name, feeder, replay or (), on_close=feeder.closed))
    return watch


async def test_pending_changes_conflate_per_name_and_names_come_out_in_pending_order() -> None:
    dispatcher = Dispatcher(clock=FakeClock())
    async with running(dispatcher), _watch(dispatcher, "*") as watch:
        done = dispatcher.publish(
            [
                changed("b", "1"),
                ambient("b", "old warning"),
                changed("a", "1"),
                ambient("a", "kept beside the change"),
                ambient("a", "the latest warning"),
                changed("b", "2"),  # replaces b's change, drops b's warning, keeps b's place
                missing("c"),
                changed("c", "1"),
            ]
        )
        assert done is not None
        await done
        got = [await anext(watch) for _ in range(4)]
    assert got == [
        changed("b", "2"),
        changed("a", "1"),
        ambient("a", "the latest warning"),
        changed("c", "1"),
    ]


async def test_a_data_error_replaces_the_waiting_change_and_its_warning() -> None:
    dispatcher = Dispatcher(clock=FakeClock())
    async with running(dispatcher), _watch(dispatcher) as watch:
        done = dispatcher.publish([changed("a", "1"), ambient("a"), missing("a")])
        assert done is not None
        await done
        assert await anext(watch) == missing("a")
        dispatcher.publish([ambient("a", "later")])
        assert await anext(watch) == ambient("a", "later")


async def test_a_watch_nobody_reads_never_holds_up_delivery_to_other_watchers() -> None:
    dispatcher = Dispatcher(clock=FakeClock())
    seen: list[Event] = []
    async with running(dispatcher), _watch(dispatcher) as idle:
        dispatcher.add(EDS, "a", CallbackWatcher(seen.append), ())
        futures = [dispatcher.publish([changed("a", str(v))]) for v in range(1000)]
        last = futures[-1]
        assert last is not None
        async with asyncio.timeout(5):
            await last
        assert len(seen) == 1000
        assert await anext(idle) == changed("a", "999")  # only the latest waited


async def test_cancel_ends_iteration_at_once_and_unsubscribes() -> None:
    departed: list[tuple[str, str]] = []
    dispatcher = Dispatcher(clock=FakeClock(), on_last_watcher=lambda *key: departed.append(key))
    async with running(dispatcher):
        watch = _watch(dispatcher, replay=[changed("a", "1")])
        await idle()
        reader = asyncio.ensure_future(anext(watch))
        assert await reader == changed("a", "1")
        reader = asyncio.ensure_future(anext(watch))
        await idle()
        watch.cancel()
        with pytest.raises(StopAsyncIteration):
            await reader
        assert departed == [(EDS, "a")]


async def test_cancel_drops_what_was_waiting() -> None:
    dispatcher = Dispatcher(clock=FakeClock())
    async with running(dispatcher):
        async with _watch(dispatcher, replay=[changed("a", "1")]) as watch:
            await idle()
        assert watch.cancelled
        assert [event async for event in watch] == []


async def test_closing_the_dispatcher_ends_a_waiting_iteration() -> None:
    dispatcher = Dispatcher(clock=FakeClock())
    async with running(dispatcher), _watch(dispatcher) as watch:
        reader = asyncio.ensure_future(anext(watch))
        await idle()
        dispatcher.close()
        with pytest.raises(StopAsyncIteration):
            await reader
        assert watch.cancelled


async def test_a_dropped_watch_unsubscribes_and_warns_resource_warning() -> None:
    departed: list[tuple[str, str]] = []
    dispatcher = Dispatcher(clock=FakeClock(), on_last_watcher=lambda *key: departed.append(key))

    def watch_and_forget() -> None:
        watch = _watch(dispatcher)
        assert departed == []
        del watch
        gc.collect()

    with pytest.warns(ResourceWarning, match="never cancelled") as warned:
        watch_and_forget()
    assert departed == [(EDS, "a")]
    assert isinstance(warned[0].source, Watch)  # the warning points at the watch itself


async def test_a_watch_left_with_async_with_is_collected_without_a_warning() -> None:
    dispatcher = Dispatcher(clock=FakeClock())

    async def use_and_leave() -> None:
        async with _watch(dispatcher):
            pass

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await use_and_leave()
        gc.collect()
    assert caught == []
