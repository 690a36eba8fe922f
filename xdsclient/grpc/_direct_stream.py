"""The direct server-streaming call: grpc.aio's own stream to the picked endpoint, as a subclass.

Why: a server-streaming call whose route decides only its cluster (`ChannelCore.direct`) has
a plan of one attempt with nothing to wait out, as the usual unary call has. Driving it costs a
task, a queue between that task and the reader, and a turn of the loop per message. When the
channel has its configuration and the pick completes at once, the call is picked and sent as
it is made (grpc.aio's call starts then too) and the caller gets a `DirectStream`: grpc.aio's
``UnaryStreamCall`` itself (as `DirectCall` is its unary call), read as grpc.aio's, with the
bookkeeping of its end (the pick's outcome and circuit breaking to the picker, ORCA, load
reporting, the connection's count of calls) done in one done callback of its Cython call,
which runs however the stream ends: read to its end, cancelled, past its deadline, failed,
never read (it ends at its deadline: gRPC gives the status once the messages are read),
ended by the channel's close, or refused by gRPC as it is sent (metadata it rejects before
the call has a status: its sending task ends the call then). Any other case is an `XdsCall`,
handed the pick already made so that no draw is repeated.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import time
from collections.abc import Callable, Iterable
from typing import Any

import grpc

from .._call import CallConfig, LazyHeaderView, Status
from ..lb import PickOutcome, PickResult
from . import _direct
from ._call import _NO_METADATA_HEADERS, _UNKNOWN, CallTarget, XdsCall
from ._connections import Connection
from ._core import CLOSED, ChannelCore
from ._direct import _CALL_PARAMETERS, _REGISTERS, _serialize
from ._orca import load_report_of, named_metrics
from ._status import refused_by_core, rpc_error, status_code
from ._tls import TlsError

__all__ = ["DirectStream", "stream_call"]

#: grpc.aio's server-streaming call class (private to grpc.aio, untyped)
_AioUnaryStreamCall: Any = getattr(_direct._aio_call, "UnaryStreamCall", None)
#: whether what `DirectStream` adds to `DirectCall`'s private parts (`_direct.USABLE`) is
#: there with the shape it expects: else every server-streaming call is an `XdsCall`
_SHAPED = (
    _AioUnaryStreamCall is not None
    and tuple(inspect.signature(_AioUnaryStreamCall.__init__).parameters) == _CALL_PARAMETERS
    and inspect.iscoroutinefunction(getattr(_AioUnaryStreamCall, "_send_unary_request", None))
    and inspect.iscoroutinefunction(getattr(_AioUnaryStreamCall, "_raise_for_status", None))
    and hasattr(importlib.import_module("grpc._cython.cygrpc")._AioCall, "initiate_unary_stream")
)
if not _SHAPED:
    _AioUnaryStreamCall = object
_KIND = (False, True)
_COMPLETE = PickOutcome.COMPLETE
_ENDPOINTS_KEPT = 64
_CLOSED_CODE = status_code(CLOSED.code)
#: `_send`'s answer when the pick was handed back (its connection just left READY, or the
#: call could not be made): the `XdsCall` picks again
_PICK_AGAIN: Any = object()


class DirectStream(_AioUnaryStreamCall):  # type: ignore[misc]  # grpc.aio's call, untyped
    """A direct server-streaming call: grpc.aio's own ``unary_stream`` call on the picked
    endpoint's channel, made by `_send` from grpc.aio's multi-callable for it, whose end's
    bookkeeping is one done callback on its Cython call."""

    __slots__ = (
        "_closed",
        "_connection",
        "_core",
        "_ended_future",
        "_load",
        "_picked",
        "_registry",
        "_started",
    )  # fmt: skip
    #: set on the instance (not a slot: no call but a refused one pays for it) when gRPC
    #: refused to send the call: it ends as never picked (`DirectCall._refused`)
    _refused = False

    def __init__(
        self,
        multicallable: Any,
        request: Any,
        timeout: float | None,
        metadata: Any,
        credentials: grpc.CallCredentials | None,
        core: ChannelCore,
        picked: PickResult,
        connection: Connection,
        started: float,
        registry: set[Any],
    ) -> None:
        # grpc.aio's `UnaryStreamMultiCallable.__call__`, for this class: its deadline by the
        # wall clock, as grpc.aio's
        m = multicallable
        super().__init__(
            request, None if timeout is None else time.time() + timeout, metadata,
            credentials, False, m._channel, m._method, m._request_serializer,
            m._response_deserializer, m._loop, m._registered_call_handle,
        )  # fmt: skip
        self._core = core
        self._picked = picked
        self._connection = connection
        self._load: Any = None
        self._started = started
        #: the channel's calls still running: the call leaves it when it ends
        self._registry = registry
        #: whether the channel's close ended the call (CANCELLED ``Channel closed!``)
        self._closed = False
        self._ended_future: asyncio.Future[None] | None = None
        # the Cython call's done callback takes no argument (grpc.aio's own wraps it in a
        # partial of its call), and runs however the call gets its status
        self._cython_call.add_done_callback(self._finished)

    async def _send_unary_request(self) -> None:
        """grpc.aio's sending of the request, which also ends a call gRPC refuses to send (a
        ``-bin`` key with a text value): that raises here before the call has a status, so no
        done callback would run. It is cancelled (a status, so `_finished` runs, once) and
        the reader gets the error."""
        cython = self._cython_call
        try:
            await cython.initiate_unary_stream(
                _serialize(self._request, self._request_serializer), self._metadata, self._context
            )
        except asyncio.CancelledError:
            if not cython.cancelled():
                self.cancel()
            raise
        except BaseException:
            if not cython.done():
                # grpc.aio's classes have no slots: the instance's dict takes it
                self._refused = True  # type: ignore[misc]
                cython.cancel("the call could not be sent")
            raise

    async def _raise_for_status(self) -> None:
        """grpc.aio's end of a read past the last message: the channel's close is CANCELLED
        ``Channel closed!`` (an `AioRpcError`, as from a planned call), not `CancelledError`."""
        if self._closed:
            raise rpc_error(CLOSED)
        await super()._raise_for_status()

    def _finished(self) -> None:
        """grpc.aio's call ended: tell the picker, the load reporter and the connection (a
        call gRPC refused to send: the pick handed back, the load report's counts undone, as
        C-core refuses it before any pick)."""
        core = self._core
        picked = self._picked
        cython = self._cython_call
        ok = cython.is_ok()
        if not ok and not self._refused:  # C-core may refuse it with a status of its own
            status = cython._status
            if status is not None and refused_by_core(
                status.details(), status.debug_error_string()
            ):
                self._refused = True  # type: ignore[misc]  # the instance's dict
        if ok or not self._refused:
            report = None
            if not ok or picked.cluster not in core.quiet:  # someone reads its ORCA report
                status = cython._status
                report = None if status is None else load_report_of(status.trailing_metadata())
            now = core.clock()
            core.picker.call_finished(
                picked, ok, now, elapsed=now - self._started, load_report=report
            )
            load = self._load
            if load is not None:
                load.call_finished(picked.locality, ok, named_metrics(report))
        else:  # never sent
            core.picker.call_abandoned(picked)
            if self._load is not None:
                self._load.call_not_sent(picked.locality)
        connection = self._connection
        if connection.held:  # `Connections.call_ended`, inline: a held one stays open
            connection.calls -= 1
        else:
            core.connections.call_ended(connection)
        self._registry.discard(self)
        future = self._ended_future
        if future is not None and not future.done():
            future.set_result(None)

    # --- grpc.aio's call interface, where the channel's close or the subclass differ ---

    def cancelled(self) -> bool:
        return not self._closed and bool(self._cython_call.cancelled())

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        if self._cython_call.done():
            asyncio.get_running_loop().call_soon(callback, self)
        else:
            super().add_done_callback(callback)

    async def code(self) -> grpc.StatusCode:
        code: grpc.StatusCode = await super().code()
        return _CLOSED_CODE if self._closed else code

    async def details(self) -> str:
        details: str = await super().details()
        return CLOSED.details if self._closed else details

    # --- the channel's hooks ---

    def close_by_channel(self) -> None:
        """The channel closes: the call ends CANCELLED (``Channel closed!``)."""
        if not self._cython_call.done():
            self._closed = True
            self.cancel()

    def ended(self) -> asyncio.Future[None]:
        """A future done once the call has ended."""
        future = self._ended_future
        if future is None:
            future = self._ended_future = asyncio.get_running_loop().create_future()
            if self._cython_call.done():
                future.set_result(None)
        return future


def stream_call(
    target: CallTarget,
    request: Any,
    timeout: float | None,
    metadata: Iterable[tuple[str, str | bytes]] | None,
    credentials: grpc.CallCredentials | None,
    wait_for_ready: bool | None,
    compression: grpc.Compression | None,
) -> Any:
    """A server-streaming call of ``target``'s multi-callable: a `DirectStream` sent at once
    when its route decides only its cluster and the pick completes now, else an `XdsCall`
    (given the pick if one was made)."""
    picked: Any = None
    core = target.core
    config = core.config
    if (
        config.__class__ is CallConfig
        and not core.closed
        and (timeout is None or timeout > 0)
        and _SHAPED
        and _direct.USABLE
    ):
        metadata = tuple(metadata) if metadata else ()
        method = target.method
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
                    core, picked, now, target, request, timeout, metadata, credentials,
                    compression,
                )  # fmt: skip
                if sent is _PICK_AGAIN:
                    picked = None
                elif sent is not None:
                    return sent
    call = XdsCall(
        target, _KIND, request, timeout, metadata, credentials, wait_for_ready, compression
    )
    if picked is not None and not isinstance(picked, Status):
        call._picked = picked  # its driver runs at the loop's next turn: it takes the pick
        call._picked_in = direct
        call._request_hash = request_hash
    target.registry.add(call)
    return call


def _send(
    core: ChannelCore,
    picked: PickResult,
    now: float,
    target: CallTarget,
    request: Any,
    timeout: float | None,
    metadata: tuple[tuple[str, str | bytes], ...],
    credentials: grpc.CallCredentials | None,
    compression: grpc.Compression | None,
) -> Any:
    """Send the stream picked at ``now`` on the pick's connection: its `DirectStream`;
    `_PICK_AGAIN` when the connection just left READY or the call could not be made (the pick
    is handed back: the `XdsCall` picks again); None when TLS is refused (the `XdsCall` handed
    the pick decides)."""
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
    try:  # a raise here must not keep the pick: it is handed back and the `XdsCall` picks
        multicallable = target.multicallables.get(connection.channel)
        if multicallable is None:
            multicallable = _multicallable(target, connection.channel)
        if compression:  # grpc.aio's multi-callable adds the compression's metadata
            metadata = multicallable._init_metadata(metadata, compression)
        load = core.load_of(picked.cluster)
        call = DirectStream(
            multicallable, request, timeout, metadata, credentials, core, picked, connection,
            now, target.registry,
        )  # fmt: skip
    except Exception:  # unused: no outcome; the `XdsCall` sends it again and fails as it does
        core.picker.call_abandoned(picked)
        return _PICK_AGAIN
    # the call is out and ends through `DirectStream._finished`: nothing below raises
    connection.calls += 1  # `Connections.call_started`, inline
    locality = picked.locality
    if load is not None and locality is not None:
        load.call_started(locality)
        call._load = load
    if _REGISTERS:  # as grpc.aio's multi-callable does
        multicallable._python_channel._register_call(call)
    target.registry.add(call)
    return call


def _multicallable(target: CallTarget, channel: Any) -> Any:
    """grpc.aio's server-streaming multi-callable of ``target``'s method on an endpoint's
    ``channel``, kept in the target's (started over past `_ENDPOINTS_KEPT`: the channels of
    closed connections are not held for long)."""
    multicallables = target.multicallables
    if len(multicallables) >= _ENDPOINTS_KEPT:
        multicallables.clear()
    made = multicallables[channel] = target.core.multicallable(
        channel, (target.method, *_KIND, target.registered), target.serializer, target.deserializer
    )
    return made
