"""LoopThread: an asyncio event loop on a thread of its own, driven from synchronous code.

Why: the client is asyncio through and through (grpc.aio streams, one serializer task, timers on
the loop's clock), and services without an event loop (Flask, Django, Celery workers) need it
all the same. Rather than a second, blocking implementation, the sync side runs the one client
on a loop that a background thread owns, and every synchronous call is a coroutine handed to
that loop and waited for. The sync facade of the client (`SyncXdsClient`) and the sync httpx
transport share this one runner.

Why not anyio's blocking portal: the project is asyncio only, the portal runs every call in its
task group's cancel scope (a hop more per call, where the HTTP transport sends one per request),
and it has no bridge from an async iterator to a sync one, which both users need (watch events,
response bodies).

Rules:
- A blocking call never runs where it would wait on itself: on the loop's own thread, or in a
  thread with a running event loop (which it would block; a deadlock when that loop serves what
  the call waits for). Both raise `RuntimeError` at once, saying what to do instead.
- An error raised on the loop is raised in the caller as the same exception object (its type,
  its message, the loop side's traceback).
- A caller that stops waiting (its timeout passed, ``KeyboardInterrupt``) cancels the coroutine
  it was waiting for.
- Every call accepted before `LoopThread.stop` either finishes or is cancelled when the loop
  stops, and its caller then gets `ClientClosedError`; a call after `stop` gets it at once.
  `stop` is idempotent and joins the thread.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, Generic, TypeVar

from .. import ClientClosedError

__all__ = ["BridgedIterator", "LoopThread"]

T = TypeVar("T")

_NEW, _RUNNING, _STOPPED = "new", "running", "stopped"


class LoopThread:
    """An asyncio event loop running on a daemon thread it owns, for synchronous callers.

    ``start`` starts the thread (and its loop); `run` hands a coroutine to the loop and waits
    for its result, `call` does the same for a plain function, `submit` returns a
    `concurrent.futures.Future` instead of waiting, and `iterate` turns an async iterator
    into a blocking one. Every method is thread-safe. ``stop`` cancels what is still running,
    closes the loop and joins the thread; it also runs at interpreter exit for a loop thread
    left running. Use it as a context manager to start and stop it.
    """

    def __init__(self, *, name: str = "xdsclient-loop") -> None:
        """``name``: the thread's name (in logs and debuggers)."""
        self._name = name
        self._lock = threading.Lock()
        self._state = _NEW
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Whether the loop runs: started and not stopped."""
        return self._state == _RUNNING

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop (raises `RuntimeError` before `start`)."""
        if self._loop is None:
            raise RuntimeError("the loop thread has not started")
        return self._loop

    def is_loop_thread(self) -> bool:
        """Whether the calling thread is the loop's thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    def __enter__(self) -> LoopThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start the thread and return once its loop runs. Raises `RuntimeError` if it was
        started before (a loop thread starts once)."""
        with self._lock:
            if self._state != _NEW:
                raise RuntimeError(f"a LoopThread starts once; {self._name} is {self._state}")
            loop = asyncio.new_event_loop()
            ready = threading.Event()
            loop.call_soon(ready.set)
            self._loop = loop
            self._thread = threading.Thread(target=self._main, name=self._name, daemon=True)
            self._state = _RUNNING
            self._thread.start()
        ready.wait()
        atexit.register(self.stop)

    def stop(self, *, timeout: float | None = 10.0) -> None:
        """Cancel every task still on the loop, close it and join the thread (``timeout``
        seconds at most). Idempotent; callers waiting on the loop get `ClientClosedError`.
        From the loop's own thread it only asks the loop to stop (a thread cannot join
        itself)."""
        with self._lock:
            state, self._state = self._state, _STOPPED
            if state == _RUNNING:
                loop = self.loop
                loop.call_soon_threadsafe(loop.stop)
        if state == _NEW:
            return
        atexit.unregister(self.stop)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _main(self) -> None:
        loop = self.loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            try:
                _cancel_all(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                asyncio.set_event_loop(None)
                loop.close()

    # ------------------------------------------------------------------ calls

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the loop; its future, without waiting (callable from any thread,
        the loop's own included). Raises `ClientClosedError` once the loop stopped."""
        with self._lock:
            if self._state != _RUNNING:
                coro.close()  # never awaited: no "coroutine was never awaited" warning
                if self._state == _NEW:
                    raise RuntimeError("the loop thread has not started: call start() first")
                raise ClientClosedError(f"the event loop thread {self._name} has stopped")
            return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], *, timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result; its exception is raised here.

        After ``timeout`` seconds the coroutine is cancelled and `TimeoutError` raised. Raises
        `RuntimeError` on the loop's thread or inside a running event loop (see the module's
        rules), `ClientClosedError` when the loop stopped before the coroutine finished.
        """
        try:
            self.check_blocking("a blocking call")
        except RuntimeError:
            coro.close()
            raise
        return self.wait(self.submit(coro), timeout=timeout)

    def call(self, function: Callable[..., T], *args: Any, timeout: float | None = None) -> T:
        """Call the plain function ``function(*args)`` on the loop and return its result."""

        async def call() -> T:
            return function(*args)

        return self.run(call(), timeout=timeout)

    def wait(self, future: concurrent.futures.Future[T], *, timeout: float | None = None) -> T:
        """Wait for a future from `submit`, as `run` does (cancelling it when the wait ends
        early)."""
        try:
            return future.result(timeout)
        except concurrent.futures.CancelledError:
            raise ClientClosedError(
                f"the event loop thread {self._name} stopped before the call finished"
            ) from None
        except TimeoutError:
            if future.done():  # the coroutine's own TimeoutError (or it ended just now)
                return future.result()
            future.cancel()
            raise TimeoutError(
                f"the call on {self._name} did not finish within {timeout:g}s"
            ) from None
        except BaseException:  # KeyboardInterrupt, SystemExit: the caller gave up
            future.cancel()
            raise

    def check_blocking(self, what: str) -> None:
        """Raise `RuntimeError` naming ``what`` when the calling thread must not block on the
        loop: the loop's own thread, or any thread with a running event loop."""
        if self.is_loop_thread():
            raise RuntimeError(
                f"{what} waits for the event loop thread and was called on it: that would "
                "deadlock; await the async API there instead"
            )
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        raise RuntimeError(
            f"{what} blocks, and was called inside a running event loop, which it would stop "
            "(and deadlock, when that loop serves what it waits for); use the async API there "
            "(XdsClient, xdsclient.httpx.XdsTransport) with await"
        )

    def call_soon(self, function: Callable[..., object], *args: Any) -> None:
        """Schedule ``function(*args)`` on the loop without waiting (from any thread; quietly
        nothing once the loop stopped, which ended whatever it was meant to end)."""
        with self._lock:
            if self._state == _RUNNING:
                self.loop.call_soon_threadsafe(function, *args)

    def iterate(self, iterator: AsyncIterator[T]) -> BridgedIterator[T]:
        """``iterator`` (an async iterator to run on this loop) as a blocking iterator."""
        return BridgedIterator(self, iterator)


class BridgedIterator(Generic[T]):
    """An async iterator of a `LoopThread`'s loop, read from synchronous code: each ``next``
    runs the next step on the loop and waits for it. `close` (or leaving ``with``) closes
    the async iterator on the loop (``aclose``, when it has one); iteration then ends. Made by
    `LoopThread.iterate`; one consumer at a time."""

    def __init__(self, runner: LoopThread, iterator: AsyncIterator[T]) -> None:
        self._runner = runner
        self._iterator = iterator
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether it ended: closed, or the async iterator was exhausted."""
        return self._closed

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        if self._closed:
            raise StopIteration
        more, item = self._runner.run(_step(self._iterator))
        if not more:
            self._closed = True
            raise StopIteration
        return item  # type: ignore[return-value]  # more: an item

    def close(self) -> None:
        """Close the async iterator on the loop. Idempotent; quiet once the loop stopped."""
        if self._closed:
            return
        self._closed = True
        aclose = getattr(self._iterator, "aclose", None)
        if aclose is not None and self._runner.running:
            with contextlib.suppress(ClientClosedError):  # stopped meanwhile: closed with it
                self._runner.run(aclose())

    def __enter__(self) -> BridgedIterator[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _step(iterator: AsyncIterator[T]) -> tuple[bool, T | None]:
    """The next item as (True, item), or (False, None) at the end (a Future cannot carry a
    StopAsyncIteration across threads cleanly)."""
    try:
        return True, await iterator.__anext__()
    except StopAsyncIteration:
        return False, None


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel every task left on ``loop`` and let each run to its end."""
    tasks = asyncio.all_tasks(loop)
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
