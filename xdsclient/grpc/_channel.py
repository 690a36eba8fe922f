"""`XdsChannel`: a grpc.aio channel whose calls go where the xDS configuration says.

Why a channel of its own rather than grpcio's ``xds:///``: the configuration, the picks and each
call's outcome are this library's, in Python (a user sees and balances them), while generated
stubs work unchanged. The channel only wires the parts: `ChannelCore` (configuration, picker,
connections, load reporters), one `XdsCall` per RPC, and grpc.aio's lifecycle: `close` refuses
new calls, fails the queued ones, lets calls in flight run for ``grace`` and then ends them.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from types import TracebackType
from typing import Any

import attrs
import grpc

from .. import XdsClient
from ..lb import ConnectivityState
from ._call import CallTarget, Starter, XdsCall
from ._core import ChannelCore
from ._direct import DirectCall, unary_call
from ._direct_stream import DirectStream, stream_call
from ._intercept import InterceptedCall, applicable

__all__ = ["XdsChannel"]

_CONNECTIVITY = {
    None: grpc.ChannelConnectivity.CONNECTING,
    ConnectivityState.IDLE: grpc.ChannelConnectivity.IDLE,
    ConnectivityState.CONNECTING: grpc.ChannelConnectivity.CONNECTING,
    ConnectivityState.READY: grpc.ChannelConnectivity.READY,
    ConnectivityState.TRANSIENT_FAILURE: grpc.ChannelConnectivity.TRANSIENT_FAILURE,
}
_UNARY = (False, False)
MetadataType = grpc.aio.Metadata | Sequence[tuple[str, str | bytes]]
RequestIterator = AsyncIterator[Any] | Iterator[Any]


class XdsChannel(grpc.aio.Channel):
    """A grpc.aio channel to an xDS target (``xds:///name``, ``xds://authority/name``, an
    xdstp listener name, or a plain listener name), for generated stubs:

        async with XdsChannel("xds:///svc") as channel:
            reply = await EchoStub(channel).Say(request, timeout=2.0)

    With no ``client``, the channel makes an `XdsClient` from the bootstrap as grpcio finds it
    (``GRPC_XDS_BOOTSTRAP``, then ``GRPC_XDS_BOOTSTRAP_CONFIG``) and closes it with itself;
    a ``client`` given is shared and left open. ``channel_options`` go to every endpoint's
    grpc.aio channel; ``interceptors`` are grpc.aio's client interceptors, run as grpc.aio runs
    them (in order, each call's details passed on). A cluster with an ``UpstreamTlsContext``
    gets TLS from the bootstrap's certificate providers (gRFC A29); one without uses
    ``fallback_credentials`` (None: plaintext), as grpcio's ``xds_channel_credentials`` falls
    back. ``rng`` seeds every random choice
    (weighted clusters, faults, retries' jitter, picks). The channel starts watching at its
    first call, `channel_ready`, ``get_state(try_to_connect=True)`` or ``async with``.
    """

    def __init__(
        self,
        target: str,
        *,
        client: XdsClient | None = None,
        channel_options: Sequence[tuple[str, Any]] = (),
        interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
        rng: random.Random | None = None,
        fallback_credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        owns = client is None
        self._core = ChannelCore(
            target,
            client if client is not None else XdsClient(),
            owns_client=owns,
            options=tuple(channel_options),
            rng=rng if rng is not None else random.Random(),
            fallback=fallback_credentials,
        )
        self._interceptors = tuple(interceptors)
        self._calls: set[XdsCall | DirectCall | DirectStream] = set()
        self._starter = Starter()
        self._closing: asyncio.Task[None] | None = None

    @property
    def client(self) -> XdsClient:
        """The `XdsClient` the channel reads its configuration from."""
        return self._core.client

    @property
    def target(self) -> str:
        """The target the channel was made for."""
        return self._core.target

    # --- lifecycle ---

    async def __aenter__(self) -> XdsChannel:
        await self._core.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.close(None)

    async def close(self, grace: float | None = None) -> None:
        """Refuse new calls and fail queued ones at once; let calls in flight run for
        ``grace`` seconds (None: none), then end them CANCELLED; close every connection and
        the client the channel made. Idempotent."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close(grace))
        await asyncio.shield(self._closing)

    async def _close(self, grace: float | None) -> None:
        self._core.begin_close()
        ended = [call.ended() for call in self._calls]
        if ended and grace:
            await asyncio.wait(ended, timeout=grace)
        for call in list(self._calls):
            call.close_by_channel()
        if ended:
            await asyncio.wait(ended)
        await self._core.close()

    def get_state(self, try_to_connect: bool = False) -> grpc.ChannelConnectivity:
        """The channel's connectivity: IDLE before it starts, CONNECTING until a configuration
        and a connection, then gRPC's aggregate of its connections (READY if any is),
        TRANSIENT_FAILURE without a configuration, SHUTDOWN once closed."""
        core = self._core
        if core.closed:
            return grpc.ChannelConnectivity.SHUTDOWN
        if not core.started():
            if not try_to_connect:
                return grpc.ChannelConnectivity.IDLE
            core.kick()
            return grpc.ChannelConnectivity.CONNECTING
        return _CONNECTIVITY[core.state()]

    async def wait_for_state_change(self, last_observed_state: grpc.ChannelConnectivity) -> None:
        """Return once `get_state` differs from ``last_observed_state``."""
        while self.get_state() == last_observed_state:
            if last_observed_state is grpc.ChannelConnectivity.SHUTDOWN:
                return
            await self._core.changed().wait()

    async def channel_ready(self) -> None:
        """Start if idle and wait until READY."""
        while True:
            state = self.get_state(try_to_connect=True)
            if state is grpc.ChannelConnectivity.READY:
                return
            if state is grpc.ChannelConnectivity.SHUTDOWN:
                raise grpc.aio.UsageError("Channel is closed.")
            await self.wait_for_state_change(state)

    # --- multi-callables ---

    def unary_unary(
        self,
        method: str,
        request_serializer: Callable[[Any], bytes] | None = None,
        response_deserializer: Callable[[bytes], Any] | None = None,
        _registered_method: bool | None = False,
    ) -> _UnaryUnary:
        """A unary call's multi-callable (``await stub.Method(request, timeout=...)``)."""
        return _UnaryUnary(
            self, method, request_serializer, response_deserializer, bool(_registered_method)
        )

    def unary_stream(
        self,
        method: str,
        request_serializer: Callable[[Any], bytes] | None = None,
        response_deserializer: Callable[[bytes], Any] | None = None,
        _registered_method: bool | None = False,
    ) -> _UnaryStream:
        """A server-streaming multi-callable (``async for reply in stub.Method(request)``)."""
        return _UnaryStream(
            self, method, request_serializer, response_deserializer, bool(_registered_method)
        )

    def stream_unary(
        self,
        method: str,
        request_serializer: Callable[[Any], bytes] | None = None,
        response_deserializer: Callable[[bytes], Any] | None = None,
        _registered_method: bool | None = False,
    ) -> _StreamUnary:
        """A client-streaming multi-callable (a request iterator, or ``write``)."""
        return _StreamUnary(
            self, method, request_serializer, response_deserializer, bool(_registered_method)
        )

    def stream_stream(
        self,
        method: str,
        request_serializer: Callable[[Any], bytes] | None = None,
        response_deserializer: Callable[[bytes], Any] | None = None,
        _registered_method: bool | None = False,
    ) -> _StreamStream:
        """A bidirectional-streaming multi-callable."""
        return _StreamStream(
            self, method, request_serializer, response_deserializer, bool(_registered_method)
        )

    def _call(
        self,
        kind: tuple[bool, bool],
        target: CallTarget,
        request: Any,
        timeout: float | None,
        metadata: MetadataType | None,
        credentials: grpc.CallCredentials | None,
        wait_for_ready: bool | None,
        compression: grpc.Compression | None,
    ) -> grpc.aio.Call:
        interceptors = applicable(self._interceptors, kind) if self._interceptors else []
        if not interceptors:
            return self._direct(
                kind, target, request, timeout, metadata, credentials, wait_for_ready, compression
            )

        def make(details: grpc.aio.ClientCallDetails, request: Any) -> XdsCall:
            name: Any = details.method  # bytes from grpc.aio, str from some interceptors
            name = name.decode() if isinstance(name, bytes) else name
            # an interceptor may call another method: its calls share no multi-callables
            made = target
            if name != target.method:
                made = attrs.evolve(target, method=name, multicallables={})
            return self._direct(
                kind, made, request, details.timeout, details.metadata, details.credentials,
                details.wait_for_ready, compression,
            )  # fmt: skip

        details = grpc.aio.ClientCallDetails(
            target.method.encode(),  # type: ignore[arg-type]  # grpc.aio passes bytes
            timeout,
            grpc.aio.Metadata(*metadata) if metadata is not None else None,
            credentials,
            wait_for_ready,
        )
        return InterceptedCall(interceptors, kind, details, request, make)

    def _direct(
        self,
        kind: tuple[bool, bool],
        target: CallTarget,
        request: Any,
        timeout: float | None,
        metadata: MetadataType | None,
        credentials: grpc.CallCredentials | None,
        wait_for_ready: bool | None,
        compression: grpc.Compression | None,
    ) -> XdsCall:
        call = XdsCall(
            target, kind, request, timeout, metadata, credentials, wait_for_ready, compression
        )
        self._calls.add(call)
        return call


class _MultiCallable:
    def __init__(
        self,
        channel: XdsChannel,
        method: str,
        serializer: Callable[[Any], bytes] | None,
        deserializer: Callable[[bytes], Any] | None,
        registered: bool,
    ) -> None:
        self._channel = channel
        #: what its calls share (grpc.aio's multi-callables per endpoint channel among them)
        self._target = CallTarget(
            core=channel._core,
            method=method,
            serializer=serializer,
            deserializer=deserializer,
            registry=channel._calls,
            multicallables={},
            starter=channel._starter,
            registered=registered,
        )


class _UnaryUnary(_MultiCallable, grpc.aio.UnaryUnaryMultiCallable):  # type: ignore[type-arg]
    def __call__(
        self,
        request: Any,
        *,
        timeout: float | None = None,
        metadata: MetadataType | None = None,
        credentials: grpc.CallCredentials | None = None,
        wait_for_ready: bool | None = None,
        compression: grpc.Compression | None = None,
    ) -> Any:
        channel = self._channel
        if channel._interceptors:
            return channel._call(
                _UNARY, self._target, request, timeout, metadata, credentials, wait_for_ready,
                compression,
            )  # fmt: skip
        return unary_call(  # the usual call
            self._target, request, timeout, metadata, credentials, wait_for_ready, compression
        )


class _UnaryStream(_MultiCallable, grpc.aio.UnaryStreamMultiCallable):  # type: ignore[type-arg]
    def __call__(
        self,
        request: Any,
        *,
        timeout: float | None = None,
        metadata: MetadataType | None = None,
        credentials: grpc.CallCredentials | None = None,
        wait_for_ready: bool | None = None,
        compression: grpc.Compression | None = None,
    ) -> Any:
        channel = self._channel
        if channel._interceptors:
            return channel._call(
                (False, True), self._target, request, timeout, metadata, credentials,
                wait_for_ready, compression,
            )  # fmt: skip
        return stream_call(  # the usual stream
            self._target, request, timeout, metadata, credentials, wait_for_ready, compression
        )  # fmt: skip


class _StreamRequests(_MultiCallable):
    """A client-streaming or bidirectional multi-callable (its `_kind` says which)."""

    _kind: tuple[bool, bool]

    def __call__(
        self,
        request_iterator: RequestIterator | None = None,
        timeout: float | None = None,
        metadata: MetadataType | None = None,
        credentials: grpc.CallCredentials | None = None,
        wait_for_ready: bool | None = None,
        compression: grpc.Compression | None = None,
    ) -> Any:
        return self._channel._call(
            self._kind, self._target, request_iterator, timeout, metadata, credentials,
            wait_for_ready, compression,
        )  # fmt: skip


class _StreamUnary(_StreamRequests, grpc.aio.StreamUnaryMultiCallable):  # type: ignore[type-arg]
    _kind = (True, False)


class _StreamStream(_StreamRequests, grpc.aio.StreamStreamMultiCallable):  # type: ignore[type-arg]
    _kind = (True, True)
