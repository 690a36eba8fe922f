"""The dispatcher and the conflating Watch on their own: real events, a fake clock."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys

import pytest

from tests.shell.conftest import settle
from xdsclient import (
    AmbientError,
    CallbackWatcher,
    DataError,
    Event,
    ResourceChanged,
    TransportError,
    Watch,
    WatchHandle,
)
from xdsclient._shell._tasks import TaskOwner
from xdsclient._watchers import Dispatcher
from xdsclient.testing import FakeClock

EDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"


def changed(name: str, version: str) -> ResourceChanged:
    return ResourceChanged(type_url=EDS, name=name, value=None, version=version)


def ambient(name: str) -> AmbientError:
    return AmbientError(type_url=EDS, name=name, error=TransportError("down"))


def _watch() -> Watch:
    watch = Watch()
    watch._attach(WatchHandle(lambda handle: None))
    return watch


async def test_a_watch_keeps_the_latest_state_per_resource_in_the_order_they_changed() -> None:
    watch = _watch()
    feed = watch._watcher()
    feed.on_resource_changed(changed("a", "1"))
    feed.on_resource_changed(changed("b", "1"))
    feed.on_resource_changed(changed("a", "2"))
    feed.on_ambient_error(ambient("a"))
    got = [await anext(watch) for _ in range(3)]
    assert got == [changed("a", "2"), ambient("a"), changed("b", "1")]
    feed.on_ambient_error(ambient("b"))
    feed.on_resource_changed(DataError(type_url=EDS, name="b", error=TransportError("x")))
    assert isinstance(await anext(watch), DataError)  # a newer change drops the older warning
    watch.cancel()
    assert [e async for e in watch] == []


async def test_a_slow_callback_is_logged_by_name_once_past_the_threshold(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    dispatcher = Dispatcher(clock=clock, slow_threshold=2.0)
    gate = asyncio.Event()

    async def rebuild_pool(event: Event) -> None:
        await gate.wait()

    owner = TaskOwner()
    owner.start(dispatcher.run(), name="xdsclient-test-dispatcher")
    dispatcher.add(EDS, "a", CallbackWatcher(rebuild_pool), ())
    done = dispatcher.publish([changed("a", "1")])
    assert done is not None
    with caplog.at_level(logging.WARNING, logger="xdsclient"):
        await settle()
        clock.advance(1.9)
        await settle()
        assert "rebuild_pool" not in caplog.text
        clock.advance(0.2)
        await settle()
        assert "rebuild_pool has run for more than 2 s" in caplog.text
    gate.set()
    await done
    await owner.close()


async def test_a_sync_callback_over_the_threshold_is_logged_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    dispatcher = Dispatcher(clock=clock, slow_threshold=1.0)

    def blocking_work(event: Event) -> None:
        clock.advance(5)  # as if it had blocked the loop for five seconds

    owner = TaskOwner()
    owner.start(dispatcher.run(), name="xdsclient-test-dispatcher")
    dispatcher.add(EDS, "a", CallbackWatcher(blocking_work), ())
    with caplog.at_level(logging.WARNING, logger="xdsclient"):
        done = dispatcher.publish([changed("a", "1")])
        assert done is not None
        await done
    assert "blocking_work has run for more than 1 s" in caplog.text
    await owner.close()


async def test_a_watcher_added_after_a_batch_is_published_does_not_receive_it() -> None:
    dispatcher = Dispatcher(clock=FakeClock())
    early: list[Event] = []
    late: list[Event] = []
    dispatcher.add(EDS, "a", CallbackWatcher(early.append), ())
    done = dispatcher.publish([changed("a", "2")])
    dispatcher.add(EDS, "a", CallbackWatcher(late.append), [changed("a", "2")])  # its replay
    owner = TaskOwner()
    owner.start(dispatcher.run(), name="xdsclient-test-dispatcher")
    assert done is not None
    await done
    await settle()
    assert early == late == [changed("a", "2")]
    await owner.close()


async def test_a_failing_owned_task_is_logged_and_leaves_its_siblings_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    owner = TaskOwner()
    sibling = owner.start(asyncio.Event().wait(), name="xdsclient-test-sibling")  # type: ignore[arg-type]

    async def broken() -> None:
        raise RuntimeError("bug")

    owner.start(broken(), name="xdsclient-test-broken")
    await settle()
    assert "xdsclient task xdsclient-test-broken failed" in caplog.text
    assert not sibling.done()
    await owner.close()
    assert sibling.cancelled()
    with pytest.raises(RuntimeError, match="closed"):
        owner.start(broken(), name="late")


def test_the_protocol_core_imports_without_grpc() -> None:
    code = (
        "import sys, xdsclient, xdsclient._protocol;"
        "assert 'grpc' not in sys.modules, [m for m in sys.modules if m.startswith('grpc')]"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
