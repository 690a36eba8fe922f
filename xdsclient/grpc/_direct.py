"""The direct unary call: grpc.aio's own unary call to the picked endpoint, as a subclass.

Why a second call object: most calls are unary and their route decides only the cluster
(`ChannelCore.direct`): their plan would be one attempt with nothing to wait out. Such a call
needs no driver. When the channel has its configuration and the pick completes at once, the
call is picked and sent as it is made (grpc.aio's call starts then too) and the caller gets a
`DirectCall`: grpc.aio's call itself, made as the endpoint channel's multi-callable makes it,
with the bookkeeping of its end (circuit breaking and the pick's outcome to the picker, load
reporting, the connection's count of calls) done in one done callback that reads the finished
call's status synchronously. Awaiting it is awaiting grpc.aio's call.

Why a subclass and not a wrapper: no second object per call, and the one place a call gRPC
refuses to send (metadata C-core rejects, a request that is not bytes) can be seen is its
invocation, which raises before the call has a status, so no done callback would run: the
subclass's invocation ends such a call there, at no cost to the calls that are sent.

Why a refused call counts nothing: C-core checks a batch's metadata before the batch goes
down the channel's stack, so a call it refuses is never picked: no endpoint's failure (outlier
detection), no call in the load report. Here the pick came first, so it is handed back with no
outcome (`call_abandoned`) and the load report's counts undone (`ClusterLoad.call_not_sent`).

Why one base for the two direct kinds: `DirectCall` and `DirectStream` differ only in how
grpc.aio sends them (its unary invocation, its stream's sending task); their making, their
end's bookkeeping, the refused mark, the channel's close and hooks are `DirectBase`, mixed in
before grpc.aio's call class (its slots beside grpc.aio's instance dict), and one
`direct_call` decides for both, bound once to each class (`unary_call`, `stream_call`).

Any other case (no configuration yet, a pick that queues, fails or drops, a connection not
ready, TLS refused) is an `XdsCall`, handed the pick already made so that no draw is repeated.

Why a guard: the class leans on grpc.aio's private parts (`UnaryUnaryCall`'s constructor and
invocation, the attributes they set, `grpc._common`'s serializers, the multi-callable's
attributes, the Cython call's). `_usable` checks them at import; where one is missing or
shaped otherwise (a grpcio this was not written for), every unary call is an `XdsCall`, which
uses only grpc.aio's public API and behaves the same.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import time
from collections.abc import Callable, Generator, Iterable
from types import MethodType
from typing import Any

import grpc

from .._call import CallConfig, LazyHeaderView, Status
from ..lb import PickOutcome, PickResult
from ._call import _NO_METADATA_HEADERS, _UNARY, _UNKNOWN, CallTarget, XdsCall, ended_future
from ._connections import Connection
from ._core import CLOSED, ChannelCore
from ._orca import load_report_of, named_metrics
from ._status import refused_by_core, rpc_error, status_code
from ._tls import TlsError

__all__ = ["DirectBase", "DirectCall", "direct_call", "unary_call"]

#: what `DirectCall` reads of grpc.aio's unary call: its constructor's parameters, in order,
#: and the attributes its constructors set
_CALL_PARAMETERS = (
    "self", "request", "deadline", "metadata", "credentials", "wait_for_ready", "channel",
    "method", "request_serializer", "response_deserializer", "loop", "registered_call_handle",
)  # fmt: skip
_CALL_ATTRIBUTES = frozenset(
    ("_cython_call", "_request", "_metadata", "_context", "_request_serializer",
     "_response_deserializer", "_loop")
)  # fmt: skip
#: what `DirectCall` reads of grpc.aio's multi-callable and of its Cython call
_MULTICALLABLE_ATTRIBUTES = frozenset(
    ("_channel", "_method", "_request_serializer", "_response_deserializer", "_loop",
     "_registered_call_handle", "_python_channel")
)  # fmt: skip
_CYTHON_CALL_ATTRIBUTES = (
    "unary_unary", "add_done_callback", "is_ok", "done", "cancelled", "cancel", "_status",
)  # fmt: skip


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _set_in_init(cls: type) -> frozenset[str]:
    """The names the ``__init__`` of ``cls`` uses (the attributes it sets), and those of its
    bases' while each calls ``super()``'s."""
    names: set[str] = set()
    for klass in cls.__mro__:
        code = getattr(klass.__dict__.get("__init__"), "__code__", None)
        if code is not None:
            names.update(code.co_names)
            if "super" not in code.co_names:
                break
    return frozenset(names)


def _usable(call: Any, channel: Any, common: Any, cygrpc: Any) -> bool:
    """Whether grpc.aio's private parts `DirectCall` relies on are there with the shape it
    expects (``call``, ``channel``, ``common``, ``cygrpc``: grpc.aio's ``_call`` and
    ``_channel`` modules, ``grpc._common`` and the Cython module, None where missing)."""
    if call is None or channel is None or common is None or cygrpc is None:
        return False
    unary = getattr(call, "UnaryUnaryCall", None)
    multicallable = getattr(channel, "UnaryUnaryMultiCallable", None)
    cython_call = getattr(cygrpc, "_AioCall", None)
    if unary is None or multicallable is None or cython_call is None:
        return False
    try:
        parameters = tuple(inspect.signature(unary.__init__).parameters)
    except (TypeError, ValueError):
        return False
    return (
        parameters == _CALL_PARAMETERS
        and inspect.iscoroutinefunction(getattr(unary, "_invoke", None))
        and callable(getattr(unary, "__await__", None))
        and _CALL_ATTRIBUTES.issubset(_set_in_init(unary))
        and _MULTICALLABLE_ATTRIBUTES.issubset(_set_in_init(multicallable))
        and callable(getattr(multicallable, "_init_metadata", None))
        and all(hasattr(cython_call, name) for name in _CYTHON_CALL_ATTRIBUTES)
        and callable(getattr(common, "serialize", None))
        and callable(getattr(common, "deserialize", None))
    )


_aio_call, _aio_channel = _module("grpc.aio._call"), _module("grpc.aio._channel")
_common = _module("grpc._common")
#: whether unary calls may be `DirectCall`s (else every one is an `XdsCall`); a test flips it
USABLE = _usable(_aio_call, _aio_channel, _common, _module("grpc._cython.cygrpc"))
#: grpc.aio's unary call class and what its invocation uses (private to grpc.aio, untyped;
#: never used when not `USABLE`)
_AioUnaryUnaryCall: Any = _aio_call.UnaryUnaryCall if USABLE else object
_serialize: Any = _common.serialize if USABLE else None
_deserialize: Any = _common.deserialize if USABLE else None
_EOF: Any = grpc.aio.EOF
#: whether grpc.aio's channel keeps a registry of its calls (its close cancels them; an older
#: grpc.aio finds them by their invocation's frame, which a `DirectCall`'s is too)
_REGISTERS = hasattr(getattr(_aio_channel, "Channel", None), "_register_call")
_COMPLETE = PickOutcome.COMPLETE
_ENDPOINTS_KEPT = 64
_CLOSED_CODE = status_code(CLOSED.code)
#: `_send`'s answer when the pick was handed back (its connection just left READY, or the
#: call could not be made): the `XdsCall` picks again
_PICK_AGAIN: Any = object()
#: `DirectBase`'s base: ``object``, typed as grpc.aio's call it is mixed with (untyped)
_Untyped: Any = object


class DirectBase(_Untyped):  # type: ignore[misc]  # grpc.aio's call, untyped
    """What a direct call of either kind (`DirectCall`, `DirectStream`) adds to grpc.aio's
    call it subclasses (it comes first in their bases): its making from the endpoint's
    multi-callable, the one done callback on its Cython call that does its end's bookkeeping,
    the refused mark, the channel's close, and its hooks for the channel."""

    __slots__ = (
        "_closed",
        "_connection",
        "_core",
        "_ended_future",
        "_load",
        "_picked",
        "_registry",
        "_started",
        "_taken",
    )  # fmt: skip
    #: set on the instance (not a slot: no call but a refused one pays for it) when gRPC
    #: refused to send the call: it ends as never picked
    _refused = False
    #: the subclass's kind of call: (request streaming, response streaming)
    _KIND: tuple[bool, bool]
    #: whether grpc.aio's private parts the subclass adds to `DirectCall`'s have the shape it
    #: expects (else its calls are `XdsCall`s)
    _SHAPED = True

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
        # grpc.aio's multi-callable's ``__call__``, for this class: its deadline by the wall
        # clock, as grpc.aio's (metadata stays a tuple: grpc.aio's call makes it one)
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
        # grpc.aio's own `add_done_callback` would wrap the callback in a partial of its call:
        # the Cython call's takes one without arguments, and runs however the call gets its
        # status
        self._cython_call.add_done_callback(self._finished)

    def _not_sent(self) -> None:
        """gRPC refused to send the call (its sending raised before the call had a status,
        so no done callback would run): it is marked refused and cancelled (a status, so
        `_finished` runs, once)."""
        cython = self._cython_call
        if not cython.done():
            # grpc.aio's classes have no slots: the instance's dict takes it
            self._refused = True  # type: ignore[misc]
            cython.cancel("the call could not be sent")

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
                self._load.call_not_sent(picked.locality, self._taken)
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
        return ended_future(self, self._cython_call.done())


class DirectCall(DirectBase, _AioUnaryUnaryCall):  # type: ignore[misc]  # grpc.aio's, untyped
    """A direct unary call: grpc.aio's own unary call on the picked endpoint's channel, made
    by `_send` from grpc.aio's multi-callable for it, whose end's bookkeeping is one done
    callback on its Cython call, and whose invocation ends it when gRPC refuses to send it."""

    __slots__ = ()
    _KIND = _UNARY

    async def _invoke(self) -> Any:
        """grpc.aio's invocation of the call (serialize, send, read the reply), which also
        ends a call gRPC refuses to send (metadata it rejects, a request that is not bytes,
        `_not_sent`) and gives the caller the error."""
        cython = self._cython_call
        try:
            response = await cython.unary_unary(
                _serialize(self._request, self._request_serializer), self._metadata, self._context
            )
        except asyncio.CancelledError:
            if not cython.cancelled():
                self.cancel()
            return _EOF
        except BaseException:
            self._not_sent()
            raise
        if cython.is_ok():
            return _deserialize(response, self._response_deserializer)
        return _EOF

    def __await__(self) -> Generator[Any, None, Any]:
        try:
            return (yield from super().__await__())
        except asyncio.CancelledError:
            if self._closed:
                raise rpc_error(CLOSED) from None
            raise


def direct_call(
    cls: type[DirectBase],
    target: CallTarget,
    request: Any,
    timeout: float | None,
    metadata: Iterable[tuple[str, str | bytes]] | None,
    credentials: grpc.CallCredentials | None,
    wait_for_ready: bool | None,
    compression: grpc.Compression | None,
) -> Any:
    """A call of ``target``'s multi-callable (of ``cls``'s kind): a direct one, a ``cls``,
    sent at once when its route decides only its cluster and the pick completes now, else an
    `XdsCall` (given the pick if one was made: its driver takes it). The channel calls it
    bound to its class once (`unary_call`, `stream_call`)."""
    picked: Any = None
    core = target.core
    config = core.config
    if (
        USABLE
        and cls._SHAPED
        and config.__class__ is CallConfig
        and not core.closed
        and (timeout is None or timeout > 0)
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
                    cls, core, picked, now, target, request, timeout, metadata, credentials,
                    compression,
                )  # fmt: skip
                if sent is _PICK_AGAIN:
                    picked = None
                elif sent is not None:
                    return sent
    call = XdsCall(
        target, cls._KIND, request, timeout, metadata, credentials, wait_for_ready, compression
    )
    if picked is not None and not isinstance(picked, Status):
        call._picked = picked
        call._picked_in = direct
        call._request_hash = request_hash
    target.registry.add(call)
    return call


def _send(
    cls: type[DirectBase],
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
    """Send the call picked at ``now`` on the pick's connection: its ``cls``;
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
            multicallable = _multicallable(target, connection.channel, cls._KIND)
        if compression:  # grpc.aio's multi-callable adds the compression's metadata
            metadata = multicallable._init_metadata(metadata, compression)
        load = core.load_of(picked.cluster)
        call = cls(
            multicallable, request, timeout, metadata, credentials, core, picked, connection,
            now, target.registry,
        )  # fmt: skip
    except Exception:  # unused: no outcome; the `XdsCall` sends it again and fails as it does
        core.picker.call_abandoned(picked)
        return _PICK_AGAIN
    # the call is out and ends through `DirectBase._finished`: nothing below raises
    connection.calls += 1  # `Connections.call_started`, inline
    locality = picked.locality
    if load is not None and locality is not None:
        load.call_started(locality)
        call._load = load
        call._taken = load.taken  # a report taken before its refusal carried it (`_finished`)
    if _REGISTERS:  # as grpc.aio's multi-callable does
        multicallable._python_channel._register_call(call)
    target.registry.add(call)
    return call


def _multicallable(target: CallTarget, channel: Any, kind: tuple[bool, bool]) -> Any:
    """grpc.aio's multi-callable of ``kind`` for ``target``'s method on an endpoint's
    ``channel``, kept in the target's (started over past `_ENDPOINTS_KEPT`: the channels of
    closed connections are not held for long)."""
    multicallables = target.multicallables
    if len(multicallables) >= _ENDPOINTS_KEPT:
        multicallables.clear()
    made = multicallables[channel] = target.core.multicallable(
        channel, (target.method, *kind, target.registered), target.serializer, target.deserializer
    )
    return made


#: the channel's unary calls: `direct_call` bound to `DirectCall` (a bound method's call costs
#: no more than a function's)
unary_call: Callable[..., Any] = MethodType(direct_call, DirectCall)
