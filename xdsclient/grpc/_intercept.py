"""Client interceptors as grpc.aio takes them: ``XdsChannel(..., interceptors=[...])``.

Why a wrapper call: an interceptor is a coroutine (``intercept_unary_unary(continuation,
client_call_details, request)`` and its three siblings) while a multi-callable returns its call
at once, so, as grpc.aio does, the call returned runs the chain on a task and then stands for
what the chain gave back: the channel's own call (the last continuation makes it from the
details the interceptors passed on: method, timeout, metadata, credentials, wait_for_ready), or
a value an interceptor returned instead (a response, or an async iterator of responses).
When the chain itself fails (an interceptor let the call's `grpc.aio.AioRpcError` escape, or
the call was cancelled before it was made), ``code()``, ``details()`` and the metadata give
that error's status, as grpc.aio's intercepted call does, and the error counts as retrieved.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Generator, Sequence
from typing import Any

import grpc

__all__ = ["InterceptedCall", "applicable"]

_METHODS = {
    (False, False): (grpc.aio.UnaryUnaryClientInterceptor, "intercept_unary_unary"),
    (False, True): (grpc.aio.UnaryStreamClientInterceptor, "intercept_unary_stream"),
    (True, False): (grpc.aio.StreamUnaryClientInterceptor, "intercept_stream_unary"),
    (True, True): (grpc.aio.StreamStreamClientInterceptor, "intercept_stream_stream"),
}

#: grpc.aio's details of a call cancelled before it was made
_CANCELLED = "Locally cancelled by application!"

#: makes the channel's call from the details and request the last interceptor passed on
MakeCall = Callable[[grpc.aio.ClientCallDetails, Any], grpc.aio.Call]


def applicable(interceptors: Sequence[object], kind: tuple[bool, bool]) -> list[object]:
    """The interceptors of ``kind``'s call type, in order."""
    cls, _ = _METHODS[kind]
    return [interceptor for interceptor in interceptors if isinstance(interceptor, cls)]


class InterceptedCall(
    grpc.aio.UnaryUnaryCall,  # type: ignore[type-arg]
    grpc.aio.UnaryStreamCall,  # type: ignore[type-arg]
    grpc.aio.StreamUnaryCall,  # type: ignore[type-arg]
    grpc.aio.StreamStreamCall,  # type: ignore[type-arg]
):
    """A call whose interceptors run first (see the module's docstring)."""

    def __init__(
        self,
        interceptors: list[object],
        kind: tuple[bool, bool],
        details: grpc.aio.ClientCallDetails,
        request: Any,
        make: MakeCall,
    ) -> None:
        self._name = _METHODS[kind][1]
        self._interceptors = interceptors
        self._make = make
        self._iterator: AsyncIterator[Any] | None = None
        self._task: asyncio.Task[Any] = asyncio.ensure_future(self._run(0, details, request))
        self._task.add_done_callback(_retrieve)

    async def _run(self, index: int, details: grpc.aio.ClientCallDetails, request: Any) -> Any:
        if index == len(self._interceptors):
            return self._make(details, request)
        continuation = functools.partial(self._run, index + 1)
        return await getattr(self._interceptors[index], self._name)(continuation, details, request)

    async def _inner(self) -> Any:
        return await asyncio.shield(self._task)

    async def _call(self) -> grpc.aio.Call | None:
        inner = await self._inner()
        return inner if isinstance(inner, grpc.aio.Call) else None

    def __await__(self) -> Generator[Any, None, Any]:
        inner = yield from self._task.__await__()
        if isinstance(inner, grpc.aio.Call):
            response = yield from inner.__await__()  # type: ignore[attr-defined]
            return response
        return inner

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        while True:
            message = await self.read()
            if message is grpc.aio.EOF:
                return
            yield message

    async def read(self) -> Any:
        """The next response, or ``grpc.aio.EOF``."""
        inner = await self._inner()
        if isinstance(inner, grpc.aio.Call):
            return await inner.read()  # type: ignore[attr-defined]
        if self._iterator is None:
            self._iterator = aiter(inner)
        try:
            return await anext(self._iterator)
        except StopAsyncIteration:
            return grpc.aio.EOF

    async def write(self, request: Any) -> None:
        """Send one request message on the channel's call."""
        await (await self._inner()).write(request)

    async def done_writing(self) -> None:
        """No more request messages."""
        await (await self._inner()).done_writing()

    def cancelled(self) -> bool:
        inner = self._done_inner()
        return inner.cancelled() if inner is not None else self._task.cancelled()

    def done(self) -> bool:
        inner = self._done_inner()
        return inner.done() if inner is not None else self._task.done()

    def time_remaining(self) -> float | None:
        inner = self._done_inner()
        return inner.time_remaining() if inner is not None else None

    def cancel(self) -> bool:
        inner = self._done_inner()
        return inner.cancel() if inner is not None else self._task.cancel()

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        def chained(task: asyncio.Task[Any]) -> None:
            inner = None if task.cancelled() or task.exception() else task.result()
            if isinstance(inner, grpc.aio.Call):
                inner.add_done_callback(lambda _: callback(self))
            else:
                callback(self)

        self._task.add_done_callback(chained)

    async def initial_metadata(self) -> grpc.aio.Metadata:
        try:
            call = await self._call()
        except grpc.aio.AioRpcError as error:
            return error.initial_metadata()
        except asyncio.CancelledError:
            return None  # type: ignore[return-value]  # grpc.aio's answer, not its stubs'
        return await call.initial_metadata() if call is not None else grpc.aio.Metadata()

    async def trailing_metadata(self) -> grpc.aio.Metadata:
        try:
            call = await self._call()
        except grpc.aio.AioRpcError as error:
            return error.trailing_metadata()
        except asyncio.CancelledError:
            return None  # type: ignore[return-value]  # grpc.aio's answer, not its stubs'
        return await call.trailing_metadata() if call is not None else grpc.aio.Metadata()

    async def code(self) -> grpc.StatusCode:
        try:
            call = await self._call()
        except grpc.aio.AioRpcError as error:
            return error.code()
        except asyncio.CancelledError:
            return grpc.StatusCode.CANCELLED
        return await call.code() if call is not None else grpc.StatusCode.OK

    async def details(self) -> str:
        try:
            call = await self._call()
        except grpc.aio.AioRpcError as error:
            return error.details() or ""
        except asyncio.CancelledError:
            return _CANCELLED
        return await call.details() if call is not None else ""

    async def wait_for_connection(self) -> None:
        call = await self._call()
        if call is not None:
            await call.wait_for_connection()

    def _done_inner(self) -> grpc.aio.Call | None:
        task = self._task
        if not task.done() or task.cancelled() or task.exception() is not None:
            return None
        inner = task.result()
        return inner if isinstance(inner, grpc.aio.Call) else None


def _retrieve(task: asyncio.Task[Any]) -> None:
    """The chain's error is the call's status, read through the call: never unretrieved."""
    if not task.cancelled():
        task.exception()
