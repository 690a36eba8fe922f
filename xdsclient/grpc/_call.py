"""One RPC on an `XdsChannel`: the call path's plan driven over real attempts.

Why a driver per call: `CallPlan` decides (route, fault, deadline, attempts, retries) and the
picker picks; what is left is gRPC's call object and the waiting. A task per call runs the plan:
it waits out delays and backoffs, picks in each attempt's cluster (waiting while the pick
queues, never past the call's deadline), sends the attempt on that endpoint's connection with
``grpc-previous-rpc-attempts``, classifies how it ended, and tells the picker (outlier detection,
least request, circuit breaking, and the ORCA load report of the attempt's trailers for weighted
round robin and custom policies) and the cluster's load reporter (with the report's named
metrics). The caller sees grpc.aio's
call objects: awaitable, iterable, with metadata, code and details, and a failure is always a
`grpc.aio.AioRpcError` with gRPC's code and details.

Attempts of a request-streaming call are committed from the start (the request iterator is
consumed by the attempt and cannot be replayed), so those calls are never retried; a response
stream commits its attempt at its first message.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Generator, Sequence
from typing import Any

import grpc

from .._call import (
    Attempt,
    AttemptOutcome,
    CallConfig,
    CallPlan,
    CallRequest,
    CallState,
    Code,
    Delay,
    Finish,
    RetryAt,
    Status,
)
from .._plane import PickWait
from ..lb import PickOutcome, PickResult
from ._core import CLOSED, ChannelCore
from ._orca import load_report_of, named_metrics
from ._status import outcome_of, rpc_error
from ._tls import TlsError

__all__ = ["XdsCall"]

_PREVIOUS = "grpc-previous-rpc-attempts"
_OK = AttemptOutcome(code=Code.OK)
_END = object()
Metadata = tuple[tuple[str, str | bytes], ...]


class XdsCall(
    grpc.aio.UnaryUnaryCall,  # type: ignore[type-arg]
    grpc.aio.UnaryStreamCall,  # type: ignore[type-arg]
    grpc.aio.StreamUnaryCall,  # type: ignore[type-arg]
    grpc.aio.StreamStreamCall,  # type: ignore[type-arg]
):
    """One call of any of the four kinds (the multi-callable decides which methods apply)."""

    def __init__(
        self,
        core: ChannelCore,
        method: str,
        request: Any,
        *,
        kind: tuple[bool, bool],
        serializer: Callable[[Any], bytes] | None,
        deserializer: Callable[[bytes], Any] | None,
        timeout: float | None,
        metadata: Sequence[tuple[str, str | bytes]] | None,
        credentials: grpc.CallCredentials | None,
        wait_for_ready: bool | None,
        compression: grpc.Compression | None,
    ) -> None:
        self._core = core
        self._method = method
        self._request = request
        self._request_streaming, self._response_streaming = kind
        self._serializer = serializer
        self._deserializer = deserializer
        self._deadline = None if timeout is None else core.clock() + timeout
        self._metadata: Metadata = tuple(metadata or ())
        self._credentials = credentials
        self._wait_for_ready = bool(wait_for_ready)
        self._compression = compression
        self._plan: CallPlan | None = None
        self._current: Any = None
        self._started = asyncio.Event()
        # only a response stream reads messages one by one
        self._responses: asyncio.Queue[Any] | None = (
            asyncio.Queue() if self._response_streaming else None
        )
        self._response: Any = None
        self._error: grpc.aio.AioRpcError | None = None
        #: the ORCA load report of the last attempt's trailers (None: none came)
        self._load_report: Any = None
        self._closed_by_channel = False
        self._task: asyncio.Task[Any] = asyncio.ensure_future(self._run())
        self._task.add_done_callback(self._on_done)

    # --- grpc.aio's call interface ---

    def __await__(self) -> Generator[Any, None, Any]:
        response = yield from self._task.__await__()
        return response

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        while True:
            message = await self.read()
            if message is grpc.aio.EOF:
                return
            yield message

    async def read(self) -> Any:
        """The next response message, or ``grpc.aio.EOF`` after the last."""
        responses = self._responses
        assert responses is not None, "read() of a call without a response stream"
        message = await responses.get()
        responses.task_done()
        if message is _END:
            responses.put_nowait(_END)
            await self._task  # raises the call's error
            return grpc.aio.EOF
        return message

    async def write(self, request: Any) -> None:
        """Send one request message (a call made without a request iterator)."""
        await (await self._attempt_call()).write(request)

    async def done_writing(self) -> None:
        """No more request messages."""
        await (await self._attempt_call()).done_writing()

    async def _attempt_call(self) -> Any:
        """The attempt's grpc.aio call; the call's own error (an `AioRpcError`, as grpc.aio
        raises it) when the call ended before any attempt was sent (no route, an abort, a
        drop, the deadline)."""
        await self._wait_started()
        if self._current is None:
            await self._task  # raises the call's error
            raise grpc.aio.UsageError("the call ended before a request could be written")
        return self._current

    def cancelled(self) -> bool:
        return self._task.cancelled()

    def done(self) -> bool:
        return self._task.done()

    def time_remaining(self) -> float | None:
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - self._core.clock())

    def cancel(self) -> bool:
        if self._task.done():
            return False
        return self._task.cancel()

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        self._task.add_done_callback(lambda _: callback(self))

    async def initial_metadata(self) -> grpc.aio.Metadata:
        await self._wait_started()
        if self._current is None:
            return grpc.aio.Metadata()
        metadata: grpc.aio.Metadata = await self._current.initial_metadata()
        return metadata

    async def trailing_metadata(self) -> grpc.aio.Metadata:
        await self._ended()
        if self._error is not None:
            return self._error.trailing_metadata() or grpc.aio.Metadata()
        if self._current is None:
            return grpc.aio.Metadata()
        metadata: grpc.aio.Metadata = await self._current.trailing_metadata()
        return metadata

    async def code(self) -> grpc.StatusCode:
        await self._ended()
        if self._task.cancelled():
            return grpc.StatusCode.CANCELLED
        return self._error.code() if self._error is not None else grpc.StatusCode.OK

    async def details(self) -> str:
        await self._ended()
        if self._task.cancelled():
            return "Locally cancelled by application!"
        return (self._error.details() or "") if self._error is not None else ""

    async def wait_for_connection(self) -> None:
        await self._wait_started()

    # --- the channel's hooks ---

    def close_by_channel(self) -> None:
        """The channel closes: the call ends CANCELLED (``Channel closed!``)."""
        if not self._task.done():
            self._closed_by_channel = True
            self._task.cancel()

    @property
    def task(self) -> asyncio.Task[Any]:
        """The task running the call."""
        return self._task

    # --- the driver ---

    async def _run(self) -> Any:
        try:
            return await self._drive()
        except asyncio.CancelledError:
            if self._plan is not None and self._plan.state is not CallState.DONE:
                self._plan.cancel()
            if self._closed_by_channel:
                raise self._failed(CLOSED) from None
            raise
        except BaseException:
            if self._plan is not None and self._plan.state is not CallState.DONE:
                self._plan.cancel()
            raise
        finally:
            self._started.set()
            if self._responses is not None:
                self._responses.put_nowait(_END)

    async def _drive(self) -> Any:
        core = self._core
        if core.closed:
            raise grpc.aio.UsageError("Channel is closed.")
        config: CallConfig | Status | None = core.config
        if config is None:  # the usual call has its configuration at once
            await core.start()
            config = await core.call_config(self._deadline, self._wait_for_ready)
        if isinstance(config, Status):
            raise self._failed(config)
        request = CallRequest(
            authority=core.authority,
            path=self._method,
            metadata=self._metadata,
            deadline=self._deadline,
            channel_id=core.channel_id,
        )
        now = core.clock()
        plan = self._plan = CallPlan.begin(
            request, config, now=now, rng=core.rng, faults=core.faults
        )
        step = plan.start(now)
        while True:
            if isinstance(step, Attempt):
                outcome = await self._attempt(step, request)
                step = plan.attempt_done(outcome, core.clock())
            elif isinstance(step, Delay):
                await self._sleep_until(step.until)
                step = plan.delay_elapsed(core.clock())
            elif isinstance(step, RetryAt):
                await self._sleep_until(step.at)
                step = plan.backoff_elapsed(core.clock())
            else:
                assert isinstance(step, Finish)
                if step.at > core.clock():
                    await self._sleep_until(step.at)
                if step.status.code is Code.OK:
                    return self._response
                raise self._failed(step.status)

    async def _sleep_until(self, until: float) -> None:
        core = self._core
        while core.clock() < until:
            if core.closed:
                raise self._failed(CLOSED)
            await core.wait_change(core.changed(), until)

    async def _attempt(self, step: Attempt, request: CallRequest) -> AttemptOutcome:
        core = self._core
        headers = request.headers
        picked = core.pick_now(
            step.cluster, headers, step.request_hash, step.deadline, self._wait_for_ready
        )
        if isinstance(picked, PickWait):  # it queues (or fails a wait-for-ready call)
            picked = await core.wait_pick(picked)
        if isinstance(picked, Status):
            if picked is CLOSED:
                raise self._failed(CLOSED)
            return AttemptOutcome(code=picked.code, details=picked.details)
        if picked.outcome is PickOutcome.DROP:
            raise self._failed(self._dropped(picked))
        return await self._send(step, picked)

    def _dropped(self, picked: PickResult) -> Status:
        load = self._core.load_of(picked.cluster)
        if load is not None:
            load.call_dropped(picked.drop_category or None)
        if picked.drop_category:
            return Status(
                code=Code.UNAVAILABLE, details=f"EDS-configured drop: {picked.drop_category}"
            )
        return Status(code=Code.UNAVAILABLE, details="circuit breaker drop")

    async def _send(self, step: Attempt, picked: PickResult) -> AttemptOutcome:
        core = self._core
        assert picked.endpoint is not None
        try:
            connection = core.connect(
                (picked.endpoint.address, picked.endpoint.port), picked.cluster
            )
        except TlsError as error:  # the pick counted a call (circuit breaking): end it
            core.picker.call_finished(picked, False, core.clock())
            return AttemptOutcome(code=Code.UNAVAILABLE, details=f"{picked.cluster}: {error}")
        core.connections.call_started(connection)
        load = core.load_of(picked.cluster)
        locality = picked.locality
        if load is not None and locality is not None:
            load.call_started(locality)
        ok = False
        self._load_report = None
        started = core.clock()
        try:
            outcome = await self._exchange(connection.channel, step)
            ok = outcome.code is Code.OK
            return outcome
        finally:
            now = core.clock()
            report = self._load_report
            core.picker.call_finished(picked, ok, now, elapsed=now - started, load_report=report)
            if load is not None and locality is not None:
                load.call_finished(locality, ok, named_metrics(report))
            core.connections.call_ended(connection)

    async def _exchange(self, channel: grpc.aio.Channel, step: Attempt) -> AttemptOutcome:
        metadata = self._metadata
        if step.previous_attempts:
            metadata = (*metadata, (_PREVIOUS, str(step.previous_attempts)))
        timeout = None if step.deadline is None else max(0.0, step.deadline - self._core.clock())
        multicallable = self._core.multicallable(
            channel,
            (self._method, self._request_streaming, self._response_streaming),
            self._serializer,
            self._deserializer,
        )
        call = multicallable(
            self._request,
            timeout=timeout,
            metadata=metadata,
            credentials=self._credentials,
            wait_for_ready=False,
            compression=self._compression,
        )
        self._current = call
        self._started.set()
        committed = self._request_streaming
        try:
            responses = self._responses
            if responses is not None:
                async for message in call:
                    committed = True
                    responses.put_nowait(message)
                    await responses.join()
            else:
                self._response = await call
        except grpc.aio.AioRpcError as error:
            self._error = error
            self._load_report = load_report_of(error.trailing_metadata())
            return outcome_of(error, committed=committed)
        except asyncio.CancelledError:
            call.cancel()
            raise
        self._error = None
        self._load_report = load_report_of(await call.trailing_metadata())
        return _OK

    def _failed(self, status: Status) -> grpc.aio.AioRpcError:
        error = self._error
        if (
            error is not None
            and error.code().value[0] == status.code
            and (error.details() or "") == status.details
        ):
            return error
        self._error = rpc_error(status)
        return self._error

    async def _wait_started(self) -> None:
        await self._started.wait()

    async def _ended(self) -> None:
        if not self._task.done():
            await asyncio.wait([self._task])

    def _on_done(self, task: asyncio.Task[Any]) -> None:
        if not task.cancelled():
            task.exception()  # retrieved: the caller may never await a streaming call
