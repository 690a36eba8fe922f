"""The direct server-streaming call: grpc.aio's own stream to the picked endpoint, wrapped thinly.

Why: a server-streaming call whose route decides only its cluster (`ChannelCore.direct`) has
a plan of one attempt with nothing to wait out, as the usual unary call has. Driving it costs a
task, a queue between that task and the reader, and a turn of the loop per message. When the
channel has its configuration and the pick completes at once, the call is picked and sent as
it is made (grpc.aio's call starts then too) and the caller gets a `DirectStream`: grpc.aio's
``UnaryStreamCall`` read directly, with the bookkeeping of its end (the pick's outcome and
circuit breaking to the picker, ORCA, load reporting, the connection's count of calls) done in
one done callback of grpc.aio's call, which runs however the stream ends: read to its end,
cancelled, past its deadline, failed, never read, refused by gRPC before it was sent (its
sending task's end cancels it), or ended by the channel's close. Any other case is an
`XdsCall`, handed the pick already made so that no draw is repeated.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import grpc

from .._call import CallConfig, LazyHeaderView, Status
from ..lb import PickOutcome, PickResult
from ._call import _NO_METADATA_HEADERS, _UNKNOWN, Starter, XdsCall
from ._connections import Connection
from ._core import CLOSED, ChannelCore
from ._orca import load_report_of, named_metrics
from ._status import rpc_error, status_code
from ._tls import TlsError

__all__ = ["DirectStream", "stream_call"]

_KIND = (False, True)
_COMPLETE = PickOutcome.COMPLETE
_ENDPOINTS_KEPT = 64
_CLOSED_CODE = status_code(CLOSED.code)
#: `_send`'s answer when the pick named a connection that just left READY
_PICK_AGAIN: Any = object()


class DirectStream(grpc.aio.UnaryStreamCall):  # type: ignore[type-arg]
    """A direct server-streaming call: grpc.aio's ``unary_stream`` call on the picked
    endpoint's connection."""

    __slots__ = (
        "_call",
        "_closed",
        "_connection",
        "_core",
        "_ended_future",
        "_load",
        "_picked",
        "_registry",
        "_started",
    )  # fmt: skip

    def __init__(
        self,
        call: Any,
        core: ChannelCore,
        picked: PickResult,
        connection: Connection,
        load: Any,
        started: float,
        registry: set[Any],
    ) -> None:
        self._call = call
        self._core = core
        self._picked = picked
        self._connection = connection
        self._load = load
        self._started = started
        #: the channel's calls still running: the call leaves it when it ends
        self._registry = registry
        #: whether the channel's close ended the call (CANCELLED ``Channel closed!``)
        self._closed = False
        self._ended_future: asyncio.Future[None] | None = None
        # the Cython call's done callback takes no argument (grpc.aio's own wraps it in a
        # partial of its call), and runs however the call gets its status
        call._cython_call.add_done_callback(self._finished)
        # gRPC can refuse the call as its sending task sends it (metadata it refuses, a
        # request the serializer fails on): no status then, so no done callback either
        call._send_unary_request_task.add_done_callback(self._sent)

    def _sent(self, task: Any) -> None:
        """grpc.aio's sending task ended (the request sent, or the call cancelled): if it
        failed before the call had a status, cancel the call, which gives it one and runs
        `_finished` (the reader still gets the error, from the task)."""
        if task.cancelled() or task.exception() is None:
            return
        if not self._call._cython_call.done():
            self._call._cython_call.cancel("the call could not be sent")

    def _finished(self) -> None:
        """grpc.aio's call ended: tell the picker, the load reporter and the connection."""
        core = self._core
        picked = self._picked
        cython = self._call._cython_call
        ok = cython.is_ok()
        report = None
        if not ok or picked.cluster not in core.quiet:  # someone reads its ORCA report
            status = cython._status
            report = None if status is None else load_report_of(status.trailing_metadata())
        now = core.clock()
        core.picker.call_finished(picked, ok, now, elapsed=now - self._started, load_report=report)
        load = self._load
        if load is not None:
            load.call_finished(picked.locality, ok, named_metrics(report))
        connection = self._connection
        if connection.held:  # `Connections.call_ended`, inline: a held one stays open
            connection.calls -= 1
        else:
            core.connections.call_ended(connection)
        self._registry.discard(self)
        future = self._ended_future
        if future is not None and not future.done():
            future.set_result(None)

    # --- grpc.aio's stream interface ---

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        try:
            async for message in self._call:
                yield message
        except asyncio.CancelledError:
            if self._closed:
                raise rpc_error(CLOSED) from None
            raise

    async def read(self) -> Any:
        """The next response message, or ``grpc.aio.EOF`` after the last."""
        try:
            return await self._call.read()
        except asyncio.CancelledError:
            if self._closed:
                raise rpc_error(CLOSED) from None
            raise

    # --- grpc.aio's call interface ---

    def cancelled(self) -> bool:
        return not self._closed and bool(self._call.cancelled())

    def done(self) -> bool:
        return bool(self._call.done())

    def time_remaining(self) -> float | None:
        remaining: float | None = self._call.time_remaining()
        return remaining

    def cancel(self) -> bool:
        return bool(self._call.cancel())

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        if self._call.done():
            asyncio.get_running_loop().call_soon(callback, self)
        else:
            self._call.add_done_callback(lambda _: callback(self))

    async def initial_metadata(self) -> grpc.aio.Metadata:
        metadata: grpc.aio.Metadata = await self._call.initial_metadata()
        return metadata

    async def trailing_metadata(self) -> grpc.aio.Metadata:
        metadata: grpc.aio.Metadata = await self._call.trailing_metadata()
        return metadata

    async def code(self) -> grpc.StatusCode:
        code: grpc.StatusCode = await self._call.code()
        return _CLOSED_CODE if self._closed else code

    async def details(self) -> str:
        details: str = await self._call.details()
        return CLOSED.details if self._closed else details

    async def wait_for_connection(self) -> None:
        await self._call.wait_for_connection()

    # --- the channel's hooks ---

    def close_by_channel(self) -> None:
        """The channel closes: the call ends CANCELLED (``Channel closed!``)."""
        if not self._call.done():
            self._closed = True
            self._call.cancel()

    def ended(self) -> asyncio.Future[None]:
        """A future done once the call has ended."""
        future = self._ended_future
        if future is None:
            future = self._ended_future = asyncio.get_running_loop().create_future()
            if self._call.done():
                future.set_result(None)
        return future


def stream_call(
    core: ChannelCore,
    method: str,
    request: Any,
    serializer: Callable[[Any], bytes] | None,
    deserializer: Callable[[bytes], Any] | None,
    timeout: float | None,
    metadata: Iterable[tuple[str, str | bytes]] | None,
    credentials: grpc.CallCredentials | None,
    wait_for_ready: bool | None,
    compression: grpc.Compression | None,
    registry: set[Any],
    multicallables: dict[Any, Any],
    starter: Starter,
    registered: bool,
) -> Any:
    """A server-streaming call: a `DirectStream` sent at once when its route decides only its
    cluster and the pick completes now, else an `XdsCall` (given the pick if one was made)."""
    picked: Any = None
    config = core.config
    if config.__class__ is CallConfig and not core.closed and (timeout is None or timeout > 0):
        metadata = tuple(metadata) if metadata else ()
        direct = (core.metadata_directs if metadata else core.directs).get(method, _UNKNOWN)
        if direct is _UNKNOWN:
            direct = core.direct(config, method, bool(metadata))
        if direct is not None:
            request_hash = core.rng.getrandbits(64)  # the plan's draw
            headers = LazyHeaderView(metadata) if metadata else _NO_METADATA_HEADERS
            now = core.clock()
            deadline = None if timeout is None else now + timeout
            picked = core.pick_now(direct, headers, request_hash, deadline, bool(wait_for_ready))
            if picked.__class__ is PickResult and picked.outcome is _COMPLETE:
                sent = _send(
                    core, picked, now, method, request, serializer, deserializer, timeout,
                    metadata, credentials, compression, registry, multicallables, registered,
                )  # fmt: skip
                if sent is _PICK_AGAIN:
                    picked = None
                elif sent is not None:
                    return sent
    call = XdsCall(
        core, method, request, _KIND, serializer, deserializer, timeout, metadata,
        credentials, wait_for_ready, compression, registry, multicallables, starter, registered,
    )  # fmt: skip
    if picked is not None and not isinstance(picked, Status):
        call._picked = picked  # its driver runs at the loop's next turn: it takes the pick
        call._picked_in = direct
        call._request_hash = request_hash
    registry.add(call)
    return call


def _send(
    core: ChannelCore,
    picked: PickResult,
    now: float,
    method: str,
    request: Any,
    serializer: Callable[[Any], bytes] | None,
    deserializer: Callable[[bytes], Any] | None,
    timeout: float | None,
    metadata: tuple[tuple[str, str | bytes], ...],
    credentials: grpc.CallCredentials | None,
    compression: grpc.Compression | None,
    registry: set[Any],
    multicallables: dict[Any, Any],
    registered: bool,
) -> Any:
    """Send the stream picked at ``now`` on the pick's connection: its `DirectStream`;
    `_PICK_AGAIN` when the connection just left READY (the pick is ended: the `XdsCall` picks
    again); None when it cannot be sent now (the `XdsCall` handed the pick decides)."""
    endpoint = picked.endpoint
    assert endpoint is not None
    connections = core.connections
    try:
        policy = core.security.policy_of_cluster(picked.cluster)
        connection = connections.connect((endpoint.address, endpoint.port), policy)
    except TlsError:
        return None
    if not connections.still_ready(connection):  # closed, not yet told: pick again (C-core)
        core.picker.call_abandoned(picked)  # unused: no outcome, as C-core re-queues it
        return _PICK_AGAIN
    channel = connection.channel
    multicallable = multicallables.get(channel)
    if multicallable is None:
        if len(multicallables) >= _ENDPOINTS_KEPT:
            multicallables.clear()  # the channels of closed connections are not held for long
        multicallable = multicallables[channel] = core.multicallable(
            channel, (method, *_KIND, registered), serializer, deserializer
        )
    try:
        call = multicallable(
            request,
            timeout=timeout,
            metadata=metadata,
            credentials=credentials,
            wait_for_ready=False,
            compression=compression,
        )
    except Exception:  # the `XdsCall` sends it again and fails as it does
        return None
    connection.calls += 1  # `Connections.call_started`, inline
    load = core.load_of(picked.cluster)
    locality = picked.locality
    if load is not None and locality is not None:
        load.call_started(locality)
    else:
        load = None
    stream = DirectStream(call, core, picked, connection, load, now, registry)
    registry.add(stream)
    return stream
