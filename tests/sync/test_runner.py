"""LoopThread: coroutines run on a loop thread from synchronous code, and async iterators read
as blocking ones."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator, Iterator

import pytest

from xdsclient import ClientClosedError
from xdsclient.sync import LoopThread


@pytest.fixture
def runner() -> Iterator[LoopThread]:
    with LoopThread(name="test-loop") as thread:
        yield thread


class Boom(Exception):
    pass


def test_run_returns_the_result_computed_on_the_loop_thread(runner: LoopThread) -> None:
    """The coroutine runs on the loop's own thread, and its value comes back."""

    async def where() -> str:
        await asyncio.sleep(0)
        return threading.current_thread().name

    assert runner.run(where()) == "test-loop"
    assert runner.call(lambda: threading.current_thread().name) == "test-loop"


def test_an_error_on_the_loop_is_raised_in_the_caller_as_the_same_object(
    runner: LoopThread,
) -> None:
    """Type, message and identity survive the thread hop."""
    error = Boom("from the loop")

    async def fail() -> None:
        raise error

    with pytest.raises(Boom) as raised:
        runner.run(fail())
    assert raised.value is error


def test_a_wait_that_times_out_cancels_the_coroutine(runner: LoopThread) -> None:
    """The caller's TimeoutError cancels what it waited for on the loop."""
    started, cancelled = threading.Event(), threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError, match=r"within 0\.05s"):
        runner.run(forever(), timeout=0.05)
    assert started.is_set()
    assert cancelled.wait(5)


def test_an_error_of_the_coroutine_is_not_taken_for_the_wait_timing_out(
    runner: LoopThread,
) -> None:
    """A TimeoutError raised by the coroutine itself is the coroutine's, message and all."""

    async def times_out() -> None:
        raise TimeoutError("the coroutine's own")

    with pytest.raises(TimeoutError, match="the coroutine's own"):
        runner.run(times_out(), timeout=5)


def test_stop_cancels_calls_in_flight_and_refuses_later_ones() -> None:
    """A caller waiting when the loop stops gets ClientClosedError; so does a later call; stop
    is idempotent and joins the thread."""
    runner = LoopThread(name="stopping")
    runner.start()
    started = threading.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(runner.run, forever())
        assert started.wait(5)
        runner.stop()
        with pytest.raises(ClientClosedError, match="stopped before the call finished"):
            waiting.result(5)
    runner.stop()
    assert runner._thread is not None
    assert not runner._thread.is_alive()
    assert runner.loop.is_closed()
    with pytest.raises(ClientClosedError, match="has stopped"):
        runner.run(asyncio.sleep(0))
    with pytest.raises(RuntimeError, match="starts once"):
        runner.start()


def test_a_call_before_start_says_so() -> None:
    """Submitting to a loop thread not yet started is a clear RuntimeError."""
    with pytest.raises(RuntimeError, match="not started"):
        LoopThread().run(asyncio.sleep(0))


def test_blocking_calls_are_refused_where_they_would_deadlock(runner: LoopThread) -> None:
    """On the loop's thread, and in a thread running an event loop, run raises at once."""

    async def nested() -> None:
        runner.run(asyncio.sleep(0))

    with pytest.raises(RuntimeError, match="would deadlock"):
        runner.run(nested())
    with pytest.raises(RuntimeError, match="inside a running event loop"):
        asyncio.run(nested())


def test_iterate_reads_an_async_generator_and_closes_it_early(runner: LoopThread) -> None:
    """Each next runs a step on the loop; close runs the generator's finally there."""
    closed_on: list[str] = []

    async def numbers() -> AsyncIterator[int]:
        try:
            for n in range(100):
                yield n
        finally:
            closed_on.append(threading.current_thread().name)

    with runner.iterate(numbers()) as items:
        assert [next(items) for _ in range(3)] == [0, 1, 2]
    assert closed_on == ["test-loop"]
    assert items.closed
    assert list(items) == []


def test_iterate_ends_with_the_async_iterator(runner: LoopThread) -> None:
    """An exhausted async iterator ends the blocking one, and errors pass through typed."""

    async def two() -> AsyncIterator[int]:
        yield 1
        yield 2

    async def broken() -> AsyncIterator[int]:
        yield 1
        raise Boom("mid-stream")

    assert list(runner.iterate(two())) == [1, 2]
    items = runner.iterate(broken())
    assert next(items) == 1
    with pytest.raises(Boom, match="mid-stream"):
        next(items)


def test_thirty_two_threads_share_one_loop_thread(runner: LoopThread) -> None:
    """Calls from 32 threads at once each get their own answer."""
    barrier = threading.Barrier(32)

    async def echo(value: int) -> int:
        await asyncio.sleep(0)
        return value

    def work(i: int) -> list[int]:
        barrier.wait(10)
        return [runner.run(echo(i * 1000 + k)) for k in range(50)]

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        results = list(pool.map(work, range(32)))
    assert results == [[i * 1000 + k for k in range(50)] for i in range(32)]
