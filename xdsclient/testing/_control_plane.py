"""A real xDS management server on loopback, for tests, examples and benchmarks.

Why ours: testing a client against mocks proves little; this is a grpc.aio server that speaks
every variant (ADS and per-type services, SotW and Delta) by the spec, so tests exercise real
streams, real protobuf and real sockets. It also lets a test break things on purpose: close
streams with a status, stop answering, send any raw response, restart.

Serving rules:
- SotW: answers the requested names; wildcard (legacy empty first request, or ``*``) for any
  type; full state for LDS and CDS (every change resends them all, deletions included), only
  what changed for the other types; newly requested names are resent. A request carrying a
  nonce other than the last one sent for its type is stale and ignored.
- Delta: per-resource versions; sends what the client lacks or holds at another version,
  ``removed_resources`` for what it holds that is gone; honours ``initial_resource_versions``.
- TTLs: a resource set with a TTL goes out wrapped in ``Resource`` (SotW) with its TTL;
  `heartbeat` sends body-less refreshes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import socket
import ssl
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from typing import Any

import attrs
import grpc
from google.protobuf import any_pb2

from .._errors import XdsError
from .._names import RESOURCE_WRAPPER_TYPE_URL, WILDCARD
from .._protocol._messages import (
    DeltaDiscoveryRequest,
    DeltaDiscoveryResponse,
    DiscoveryRequest,
    DiscoveryResponse,
    Resource,
)
from .._services import ADS_SERVICE, PER_TYPE_SERVICES, Service
from .._transports._formats import dump_response, format_of
from ..resources import BUILTIN_TYPES, CLUSTER, ENDPOINT, LISTENER
from ._rest_endpoint import RestEndpoint, wait_event
from ._seeded import SeededBug

__all__ = ["ControlPlane", "ListenError", "ReceivedRequest", "SentResponse"]

_FULL_STATE = frozenset({LISTENER.type_url, CLUSTER.type_url})
_KNOWN_TYPES = frozenset(rtype.type_url for rtype in BUILTIN_TYPES)


def _v2(type_url: str) -> str:
    """The v2 spelling of a v3 type URL (a control plane stuck on the v2 API)."""
    for v3, v2 in (("envoy.config.listener.v3.Listener", "envoy.api.v2.Listener"),
                   ("envoy.config.route.v3.RouteConfiguration", "envoy.api.v2.RouteConfiguration"),
                   ("envoy.config.cluster.v3.Cluster", "envoy.api.v2.Cluster"),
                   ("envoy.config.endpoint.v3.ClusterLoadAssignment",
                    "envoy.api.v2.ClusterLoadAssignment")):  # fmt: skip
        type_url = type_url.replace(v3, v2)
    return type_url


@attrs.frozen(kw_only=True)
class ReceivedRequest:
    """A request the control plane received: when, on which stream and method, and what."""

    time: float  #: time.monotonic() at arrival
    stream: int  #: stream id, counting from 1 in order of arrival
    method: str  #: gRPC method path
    message: Any  #: the DiscoveryRequest or DeltaDiscoveryRequest

    @property
    def type_url(self) -> str:
        """The request's type URL."""
        type_url: str = self.message.type_url
        return type_url

    @property
    def is_delta(self) -> bool:
        """Whether it is a ``DeltaDiscoveryRequest`` (else a SotW ``DiscoveryRequest``)."""
        return isinstance(self.message, DeltaDiscoveryRequest)


@attrs.frozen(kw_only=True)
class SentResponse:
    """A response the control plane sent: when, on which stream, its type, nonce and names."""

    time: float
    stream: int
    type_url: str
    nonce: str
    names: tuple[str, ...]
    removed: tuple[str, ...] = ()


@attrs.define
class _Stored:
    version: str
    packed: Any  # google.protobuf.Any
    ttl: float | None


@attrs.define
class _Subscription:
    """What one stream wants of one type, and what it has been sent."""

    names: set[str] = attrs.Factory(set)
    wildcard: bool = False
    legacy_wildcard: bool = False
    requested: bool = False  # a request for this type arrived on this stream
    reply_owed: bool = False  # LDS/CDS: the last request must be answered even if nothing changed
    sent: dict[str, str] = attrs.Factory(dict)  # name -> version the client has (or was sent)
    absent: set[str] = attrs.Factory(set)  # Delta: names told not to exist (body-less Resource)
    nonce: str = ""  # last nonce sent for this type

    def wants(self, name: str) -> bool:
        return self.wildcard or name in self.names


class _Stream:
    def __init__(self, stream_id: int, method: str, *, delta: bool, type_url: str | None) -> None:
        self.id = stream_id
        self.method = method
        self.delta = delta
        self.type_url = type_url  # fixed for per-type services
        self.subs: dict[str, _Subscription] = {}
        self.wake = asyncio.Event()
        self.raw: list[Any] = []
        self.abort: tuple[grpc.StatusCode, str] | None = None
        self._nonces = itertools.count(1)

    def next_nonce(self) -> str:
        return f"{self.id}-{next(self._nonces)}"

    def sub(self, type_url: str) -> _Subscription:
        return self.subs.setdefault(type_url, _Subscription())


class ControlPlane:
    """An xDS management server bound to 127.0.0.1 (port 0 picks a free one).

    Use it as an async context manager. Resources are protobuf messages; `set` adds or replaces
    one, `remove` deletes one, and every connected stream hears of it as the spec says.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        server_credentials: grpc.ServerCredentials | None = None,
        bugs: Collection[SeededBug] = (),
    ) -> None:
        """``bugs``: protocol mistakes to make on purpose (`SeededBug`), none by default."""
        self.bugs = frozenset(bugs)
        self._host = host
        self._port = port
        self._credentials = server_credentials
        self._server: grpc.aio.Server | None = None
        self._store: dict[str, dict[str, _Stored]] = {}
        self._versions = itertools.count(1)
        self._type_versions: dict[str, str] = {}
        self._streams: dict[int, _Stream] = {}
        self._stream_ids = itertools.count(1)
        self._paused = False
        self._changed = asyncio.Condition()
        #: Every request received, in order.
        self.requests: list[ReceivedRequest] = []
        #: Every response sent, in order.
        self.responses: list[SentResponse] = []
        #: Fault: a Delta stream's initial_resource_versions are ignored (everything is resent).
        self.ignore_initial_resource_versions = False
        self._rest: RestEndpoint | None = None
        self._changed_event = asyncio.Event()

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> ControlPlane:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
        if self._rest is not None:
            await self._rest.stop()

    async def start(self) -> None:
        """Start serving (again, on the same port after `stop`)."""
        # Tests run clients with short keepalives: accept their pings instead of GOAWAY-ing them.
        # No SO_REUSEPORT (gRPC's default): a port another server listens on must be refused,
        # or clients would land on either server at random.
        server = grpc.aio.server(
            options=[
                ("grpc.so_reuseport", 0),
                ("grpc.http2.min_ping_interval_without_data_ms", 100),
                ("grpc.http2.max_ping_strikes", 0),
                ("grpc.keepalive_permit_without_calls", 1),
            ]
        )
        server.add_generic_rpc_handlers(self._handlers())
        address = f"{self._host}:{self._port}"
        try:
            if self._credentials is None:
                port = server.add_insecure_port(address)
            else:
                port = server.add_secure_port(address, self._credentials)
        except RuntimeError:  # grpc says only "Failed to bind": ask the OS why
            await server.stop(None)
            raise _listen_error(self._host, self._port) from None
        await server.start()
        self._port = port
        self._server = server

    async def stop(self, grace: float | None = None) -> None:
        """Stop serving; every open stream ends. Resources are kept for the next `start`."""
        if self._server is not None:
            server, self._server = self._server, None
            for stream in self._streams.values():
                stream.abort = (grpc.StatusCode.UNAVAILABLE, "control plane stopping")
                stream.wake.set()
            await server.stop(grace)

    async def restart(self) -> None:
        """Stop and start again on the same port, keeping every resource."""
        await self.stop()
        await self.start()

    @property
    def port(self) -> int:
        """The port it listens on (chosen when it starts, unless given)."""
        return self._port

    @property
    def address(self) -> str:
        """``host:port`` to dial."""
        return f"{self._host}:{self._port}"

    @property
    def stream_count(self) -> int:
        """Streams open now."""
        return len(self._streams)

    # ------------------------------------------------------------------ resources

    def set(
        self,
        resource: Any,
        *,
        name: str | None = None,
        ttl: float | None = None,
    ) -> str:
        """Add or replace a resource (a protobuf message); returns its new version.

        The name is the message's ``name`` (``cluster_name`` for ClusterLoadAssignment) unless
        given. With ``ttl`` (seconds) it is served with that TTL.
        """
        packed = any_pb2.Any()
        packed.Pack(resource)
        if name is None:
            name = resource.cluster_name if packed.type_url == ENDPOINT.type_url else resource.name
        return self.set_packed(packed, name=str(name), ttl=ttl)

    def set_packed(self, packed: Any, *, name: str, ttl: float | None = None) -> str:
        """Add or replace a resource given as an ``Any``, for types we do not know."""
        version = str(next(self._versions))
        self._store.setdefault(packed.type_url, {})[name] = _Stored(version, packed, ttl)
        self._type_versions[packed.type_url] = version
        self._wake_all()
        return version

    def set_all(self, resources: Iterable[Any]) -> None:
        """`set` many resources, with one wake-up of the streams."""
        for resource in resources:
            self.set(resource)

    def remove(self, type_url: str, name: str) -> None:
        """Delete a resource; streams that have it hear of it (LDS/CDS state, Delta removal)."""
        if self._store.get(type_url, {}).pop(name, None) is not None:
            self._type_versions[type_url] = str(next(self._versions))
            self._wake_all()

    def resources(self, type_url: str) -> dict[str, Any]:
        """The current resources of a type, as ``name -> Any``."""
        return {name: stored.packed for name, stored in self._store.get(type_url, {}).items()}

    def version(self, type_url: str, name: str) -> str | None:
        """The version a resource is served at, or None when it is not served."""
        stored = self._store.get(type_url, {}).get(name)
        return None if stored is None else stored.version

    def heartbeat(self, type_url: str, name: str) -> None:
        """Send a TTL refresh (a body-less ``Resource`` at the current version) to every stream
        that has the resource."""
        stored = self._store.get(type_url, {}).get(name)
        if stored is None:
            raise KeyError(f"no {type_url} {name!r} to heartbeat")
        for stream in self._streams.values():
            sub = stream.subs.get(type_url)
            if sub is None or sub.sent.get(name) != stored.version:
                continue
            beat = Resource(name=name, version=stored.version)
            if stored.ttl is not None:
                beat.ttl.FromNanoseconds(int(stored.ttl * 1e9))
            nonce = stream.next_nonce()
            sub.nonce = nonce
            if stream.delta:
                message = DeltaDiscoveryResponse(type_url=type_url, nonce=nonce, resources=[beat])
            else:
                message = DiscoveryResponse(
                    type_url=type_url,
                    nonce=nonce,
                    version_info=self._type_versions.get(type_url, ""),
                )
                message.resources.add().Pack(beat)
            stream.raw.append(message)
            stream.wake.set()

    # ------------------------------------------------------------------ faults

    def pause(self) -> None:
        """Stop answering (requests are still read and logged)."""
        self._paused = True

    def resume(self) -> None:
        """Answer again, catching every stream up."""
        self._paused = False
        self._wake_all()

    def close_streams(
        self, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE, details: str = ""
    ) -> None:
        """End every open stream with this status."""
        for stream in self._streams.values():
            stream.abort = (code, details or f"closed by the test ({code.name})")
            stream.wake.set()

    def send_raw(self, response: Any, *, stream: int | None = None) -> None:
        """Send this response as given (no bookkeeping) on one stream, or on every open stream
        of the matching kind (SotW or Delta)."""
        delta = isinstance(response, DeltaDiscoveryResponse)
        for candidate in self._streams.values():
            if (stream is None and candidate.delta == delta) or candidate.id == stream:
                candidate.raw.append(response)
                candidate.wake.set()

    # ------------------------------------------------------------------ observing

    async def wait_for_request(
        self, predicate: Callable[[ReceivedRequest], bool], *, timeout: float = 5.0, start: int = 0
    ) -> ReceivedRequest:
        """The first request (from index ``start`` of `requests`) matching ``predicate``."""

        def find() -> ReceivedRequest | None:
            return next((r for r in self.requests[start:] if predicate(r)), None)

        async with asyncio.timeout(timeout), self._changed:
            found = find()
            while found is None:
                await self._changed.wait()
                found = find()
            return found

    def acks(self, type_url: str) -> list[ReceivedRequest]:
        """Requests answering a response of this type without a NACK."""
        return [
            r
            for r in self.requests
            if r.type_url == type_url
            and r.message.response_nonce
            and not r.message.HasField("error_detail")
        ]

    def nacks(self, type_url: str | None = None) -> list[ReceivedRequest]:
        """Requests carrying an ``error_detail``."""
        return [
            r
            for r in self.requests
            if r.message.HasField("error_detail") and (type_url is None or r.type_url == type_url)
        ]

    # ------------------------------------------------------------------ serving

    def _handlers(self) -> list[grpc.GenericRpcHandler]:
        handlers = []
        for service in (ADS_SERVICE, *PER_TYPE_SERVICES.values()):
            methods: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
            for delta in (False, True):
                method = service.delta_method if delta else service.sotw_method
                if method is None:
                    continue
                methods[method] = grpc.stream_stream_rpc_method_handler(
                    self._serve_factory(service, method, delta=delta),
                    request_deserializer=(
                        DeltaDiscoveryRequest if delta else DiscoveryRequest
                    ).FromString,
                    response_serializer=lambda message: message.SerializeToString(),
                )
            handlers.append(grpc.method_handlers_generic_handler(service.name, methods))
        return handlers

    def _serve_factory(self, service: Service, method: str, *, delta: bool) -> Callable[..., Any]:
        path = f"/{service.name}/{method}"

        async def serve(
            requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]
        ) -> None:
            stream = _Stream(next(self._stream_ids), path, delta=delta, type_url=service.type_url)
            self._streams[stream.id] = stream
            reader = asyncio.create_task(self._read(stream, requests))
            reader.add_done_callback(lambda _: stream.wake.set())
            try:
                while True:
                    await stream.wake.wait()
                    stream.wake.clear()
                    if stream.abort is not None:
                        await context.abort(*stream.abort)
                    if reader.done():
                        return
                    while stream.raw:
                        await self._write(context, stream, stream.raw.pop(0))
                    if not self._paused:
                        for response in self._responses(stream):
                            await self._write(context, stream, response)
            finally:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await reader
                self._streams.pop(stream.id, None)

        return serve

    async def _write(
        self, context: grpc.aio.ServicerContext[Any, Any], stream: _Stream, response: Any
    ) -> None:
        if self.bugs:
            self._mangle(response, stream.delta)
        if stream.delta:
            names = tuple(r.name for r in response.resources)
            removed = tuple(response.removed_resources)
        else:
            names = tuple(_sotw_name(packed) for packed in response.resources)
            removed = ()
        self.responses.append(
            SentResponse(
                time=time.monotonic(),
                stream=stream.id,
                type_url=response.type_url,
                nonce=response.nonce,
                names=names,
                removed=removed,
            )
        )
        await context.write(response)

    async def _read(self, stream: _Stream, requests: AsyncIterator[Any]) -> None:
        async for request in requests:
            self.requests.append(
                ReceivedRequest(
                    time=time.monotonic(), stream=stream.id, method=stream.method, message=request
                )
            )
            if self.bugs and self._refuse(stream, request):
                pass
            elif (
                stream.type_url is not None
                and request.type_url
                and request.type_url != stream.type_url
            ):
                stream.abort = (
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"this stream carries {stream.type_url} only",
                )
            else:
                type_url = request.type_url or stream.type_url or ""
                if stream.delta:
                    self._on_delta_request(stream, type_url, request)
                else:
                    self._on_sotw_request(stream, type_url, request)
            stream.wake.set()
            async with self._changed:
                self._changed.notify_all()

    def _refuse(self, stream: _Stream, request: Any) -> bool:
        """Seeded bugs that drop a request or end the stream over it; whether one did."""
        bugs = self.bugs
        first = not any(r.stream == stream.id for r in self.requests[:-1])
        if SeededBug.NODE_REQUIRED in bugs and not first and not request.HasField("node"):
            return True
        known = request.type_url in _KNOWN_TYPES or not request.type_url
        if SeededBug.UNKNOWN_TYPE_ABORTS in bugs and not known:
            stream.abort = (grpc.StatusCode.INVALID_ARGUMENT, f"unknown type {request.type_url}")
            return True
        if SeededBug.PHANTOM_UNSUBSCRIBE_ABORTS in bugs and stream.delta:
            sub = stream.sub(request.type_url or stream.type_url or "")
            phantom = set(request.resource_names_unsubscribe) - sub.names - {WILDCARD}
            if phantom:
                stream.abort = (grpc.StatusCode.INVALID_ARGUMENT, f"not subscribed: {phantom}")
                return True
        return False

    def _resends_everything(self, request: Any) -> bool:
        """Seeded bugs that answer an ACK (or a NACK) with everything again."""
        if not request.response_nonce:
            return False
        nack = request.HasField("error_detail")
        return SeededBug.ECHO_ON_ACK in self.bugs or (
            nack and SeededBug.RESEND_AFTER_NACK in self.bugs
        )

    def _on_sotw_request(self, stream: _Stream, type_url: str, request: Any) -> None:
        sub = stream.sub(type_url)
        bugs = self.bugs
        stale = sub.requested and request.response_nonce != sub.nonce
        if stale and SeededBug.ANSWER_STALE not in bugs:
            return  # stale: a newer response is on its way
        if bugs and self._resends_everything(request):
            sub.sent.clear()
            sub.reply_owed = True
        names = set(request.resource_names)
        previous = (set(sub.names), sub.wildcard)
        if not sub.requested:
            sub.legacy_wildcard = not names
        elif names:
            sub.legacy_wildcard = False
        sub.wildcard = sub.legacy_wildcard or WILDCARD in names
        names.discard(WILDCARD)
        forget = SeededBug.NO_RESEND_ON_SUBSCRIBE not in bugs
        for added in names - sub.names:
            if forget:
                sub.sent.pop(added, None)  # newly requested: send it again even if sent before
        for dropped in sub.names - names:
            if not sub.wildcard and forget:
                sub.sent.pop(dropped, None)
        sub.names = names
        if not sub.requested or (names, sub.wildcard) != previous:
            sub.reply_owed = (
                True  # LDS/CDS: a changed request gets an answer even if nothing changed
            )
        sub.requested = True

    def _on_delta_request(self, stream: _Stream, type_url: str, request: Any) -> None:
        sub = stream.sub(type_url)
        bugs = self.bugs
        subscribe = set(request.resource_names_subscribe)
        if bugs and self._resends_everything(request):
            sub.sent.clear()
        if not sub.requested:
            sub.requested = True
            ignore = self.ignore_initial_resource_versions
            if not ignore and SeededBug.IGNORE_INITIAL_VERSIONS not in bugs:
                sub.sent.update(request.initial_resource_versions)
            if not subscribe:
                sub.wildcard = True
        elif SeededBug.NO_RESEND_ON_SUBSCRIBE not in bugs:
            for name in subscribe - {WILDCARD}:
                sub.sent.pop(name, None)
        sub.absent -= subscribe
        if WILDCARD in subscribe:
            sub.wildcard = True
        sub.names |= subscribe - {WILDCARD}
        for name in request.resource_names_unsubscribe:
            if name == WILDCARD:
                sub.wildcard = False
            else:
                sub.names.discard(name)
                sub.absent.discard(name)
            if not sub.wants(name):
                sub.sent.pop(name, None)

    def _responses(self, stream: _Stream) -> list[Any]:
        responses = []
        for type_url, sub in stream.subs.items():
            if not sub.requested:
                continue
            store = self._store.get(type_url, {})
            response = (
                self._delta_response(stream, type_url, sub, store)
                if stream.delta
                else self._sotw_response(stream, type_url, sub, store)
            )
            if response is not None:
                responses.append(response)
        return responses

    def _sotw_response(
        self, stream: _Stream, type_url: str, sub: _Subscription, store: dict[str, _Stored]
    ) -> Any:
        everything = SeededBug.UNREQUESTED_RESOURCES in self.bugs
        wanted = {name: s for name, s in store.items() if everything or sub.wants(name)}
        if type_url in _FULL_STATE and SeededBug.PARTIAL_STATE not in self.bugs:
            current = {name: stored.version for name, stored in wanted.items()}
            if current == sub.sent and not sub.reply_owed:
                return None
            to_send = wanted
            sub.sent = current
        else:
            to_send = {name: s for name, s in wanted.items() if sub.sent.get(name) != s.version}
            if not to_send:
                return None
            sub.sent.update({name: s.version for name, s in to_send.items()})
        sub.reply_owed = False
        sub.nonce = self._nonce(stream)
        response = DiscoveryResponse(
            type_url=type_url, version_info=self._type_versions.get(type_url, "0"), nonce=sub.nonce
        )
        for name, stored in to_send.items():
            if stored.ttl is None:
                response.resources.append(stored.packed)
            else:
                wrapper = Resource(name=name, version=stored.version, resource=stored.packed)
                wrapper.ttl.FromNanoseconds(int(stored.ttl * 1e9))
                response.resources.add().Pack(wrapper)
        return response

    def _delta_response(
        self, stream: _Stream, type_url: str, sub: _Subscription, store: dict[str, _Stored]
    ) -> Any:
        everything = SeededBug.UNREQUESTED_RESOURCES in self.bugs
        changed = [
            (name, stored)
            for name, stored in store.items()
            if (everything or sub.wants(name)) and sub.sent.get(name) != stored.version
        ]
        removed = [name for name in sub.sent if name not in store]
        # A subscribed name that does not exist is sent as a Resource without a body (spec:
        # "Knowing When a Requested Resource Does Not Exist", incremental variants).
        absent = sorted(n for n in sub.names if n not in store and n not in sub.sent)
        absent = [n for n in absent if n not in sub.absent]
        if SeededBug.NO_DELTA_ABSENT in self.bugs:
            absent = []
        if not changed and not removed and not absent:
            return None
        sub.nonce = self._nonce(stream)
        response = DeltaDiscoveryResponse(
            type_url=type_url,
            nonce=sub.nonce,
            system_version_info=self._type_versions.get(type_url, "0"),
            removed_resources=removed,
        )
        for name, stored in changed:
            resource = response.resources.add(name=name, version=stored.version)
            resource.resource.CopyFrom(stored.packed)
            if stored.ttl is not None:
                resource.ttl.FromNanoseconds(int(stored.ttl * 1e9))
            sub.sent[name] = stored.version
        for name in removed:
            del sub.sent[name]
        for name in absent:
            response.resources.add(name=name)
            sub.absent.add(name)
        return response

    def _nonce(self, stream: _Stream) -> str:
        if SeededBug.NO_NONCE in self.bugs:
            return ""
        if SeededBug.REUSED_NONCE in self.bugs:
            return f"{stream.id}-1"
        return stream.next_nonce()

    def _mangle(self, response: Any, delta: bool) -> None:
        """Apply the seeded bugs that change a response as it goes out."""
        bugs = self.bugs
        if SeededBug.WRONG_TYPE_URL in bugs:
            response.type_url = _v2(response.type_url)
        if SeededBug.V2_ANY_TYPES in bugs:
            for item in response.resources:
                packed = item.resource if delta else item
                packed.type_url = _v2(packed.type_url)
        if SeededBug.EMPTY_VERSION in bugs and not delta:
            response.version_info = ""
        if SeededBug.DELTA_NO_VERSION in bugs and delta:
            for item in response.resources:
                item.version = ""
        if SeededBug.DUPLICATE_RESOURCE in bugs and response.resources:
            response.resources.append(response.resources[0])

    def _wake_all(self) -> None:
        for stream in self._streams.values():
            stream.wake.set()
        self._changed_event.set()
        self._changed_event = asyncio.Event()

    # ------------------------------------------------------------------ REST-JSON and files

    async def serve_rest(
        self,
        *,
        long_poll: bool = False,
        hold: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> RestEndpoint:
        """Serve the same resources over REST-JSON polling too (needs ``xdsclient[rest]``);
        the endpoint's ``url`` goes in a `RestSource`. With ``long_poll`` a request whose
        version is current is held until something changes (at most ``hold`` seconds)."""
        if self._rest is None:
            self._rest = RestEndpoint(self, long_poll=long_poll, hold=hold, ssl_context=ssl_context)
            await self._rest.start()
        return self._rest

    def write_file(self, path: str | os.PathLike[str], type_url: str) -> str:
        """Write every resource of a type as one DiscoveryResponse to ``path`` (the format
        follows the extension, as for a `FileSource`), atomically: a temporary file renamed
        over it. Returns the version written."""
        target = os.fspath(path)
        response = self._rest_response(type_url, None)
        data = dump_response(response, format_of(target))
        directory = os.path.dirname(os.path.abspath(target))
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=".xds-", suffix=".tmp")
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(temporary, target)
        version: str = response.version_info
        return version

    def _current_version(self, type_url: str) -> str:
        return self._type_versions.get(type_url, "0")

    async def _wait_changed(self, timeout: float) -> None:
        await wait_event(self._changed_event, timeout)

    def _record_rest(self, message: Any, resource: str) -> None:
        self.requests.append(
            ReceivedRequest(
                time=time.monotonic(), stream=0, method=f"REST {resource}", message=message
            )
        )

    def _rest_response(self, type_url: str, names: Collection[str] | None) -> Any:
        """A SotW response of the resources named (all with None) at the type's version."""
        store = self._store.get(type_url, {})
        response = DiscoveryResponse(
            type_url=type_url, version_info=self._current_version(type_url)
        )
        for name, stored in store.items():
            if names is None or name in names:
                response.resources.append(stored.packed)
        self.responses.append(
            SentResponse(
                time=time.monotonic(),
                stream=0,
                type_url=type_url,
                nonce="",
                names=tuple(n for n in store if names is None or n in names),
            )
        )
        return response


class ListenError(XdsError, OSError):
    """Local: the control plane cannot listen on its address; ``errno`` says why
    (``EADDRINUSE``: another server listens there)."""

    def __init__(self, address: str, code: int | None, reason: str) -> None:
        super().__init__(f"cannot listen on {address}: {reason}")
        self.errno = code  # OSError's own field, as the OS would set it


def _listen_error(host: str, port: int) -> ListenError:
    """Why ``host:port`` cannot be bound, found by binding it as gRPC does (SO_REUSEADDR)."""
    address = f"{host}:{port}"
    try:
        with socket.create_server((host.strip("[]"), port)):
            pass
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        return ListenError(address, exc.errno, reason.lower())
    return ListenError(address, None, "gRPC could not bind it")


def _sotw_name(packed: Any) -> str:
    """The name of a resource in a SotW response (for the log), without a type registry."""
    if packed.type_url == RESOURCE_WRAPPER_TYPE_URL:
        return str(Resource.FromString(packed.value).name)
    message = _message_class(packed.type_url)
    if message is None:
        return ""
    decoded = message.FromString(packed.value)
    return str(
        decoded.cluster_name
        if packed.type_url == ENDPOINT.type_url
        else getattr(decoded, "name", "")
    )


def _message_class(type_url: str) -> Any:
    from google.protobuf import symbol_database

    try:
        return symbol_database.Default().GetSymbol(type_url.rsplit("/", 1)[-1])
    except KeyError:
        return None
