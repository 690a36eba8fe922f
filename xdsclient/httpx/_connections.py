"""The HTTP front end's connections: one httpcore connection pool per endpoint and TLS policy,
shared by the clusters that list the endpoint.

Why an owner of its own: a pool outlives the request that opened it and the snapshot that named
it, and must not outlive both. A pool is held while the current snapshot's assignments list its
endpoint (`HttpConnections.hold_only`) and while requests run on it (`HttpConnection.send`
counts each from its start until its response is closed; `request_started`/`request_ended` hold
it over any other span); it closes once neither is true, so a request in flight finishes on its
connection whatever the control plane says meanwhile.

A pool's slot is (endpoint, `TlsPolicy` or None for plaintext): the same address under two
policies gets two pools. HTTP/1.1, and HTTP/2 when asked (ALPN over TLS; prior knowledge in
plaintext when HTTP/1.1 is off). Each endpoint reports a connectivity state to ``on_state``
(the rule: `_connectivity.py`), the best of its pools' (`aggregate_state`), on change only and
never from inside `connect` or `hold_only` (from the connect's own task), so the owner may call
back in.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, Protocol

import httpcore
import httpx

from .._plane._tls_policy import TlsPolicy
from ..lb import ConnectivityState, EndpointKey, aggregate_state
from ._connectivity import Backoff, ConnectEvent, EndpointConnectivity
from ._network import Opener
from ._tls import TlsContexts

__all__ = ["HttpConnection", "HttpConnections", "ResponseBody", "Slot", "unchecked_request"]

OnState = Callable[[EndpointKey, ConnectivityState], None]
#: an endpoint and the TLS policy its pool follows (None: plaintext)
Slot = tuple[EndpointKey, TlsPolicy | None]

#: httpx's defaults
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)
DEFAULT_TIMEOUT = httpx.Timeout(5.0)
_DEFAULT_TIMEOUTS = DEFAULT_TIMEOUT.as_dict()


class Clock(Protocol):
    """What the backoff needs of a clock (`xdsclient.Clock`; `xdsclient.testing.FakeClock`)."""

    def time(self) -> float:
        """Now, in seconds."""
        ...

    async def sleep_until(self, when: float) -> None:
        """Return once `time` has reached ``when``."""
        ...


class _Monotonic:
    def time(self) -> float:
        return time.monotonic()

    async def sleep_until(self, when: float) -> None:
        await asyncio.sleep(max(0.0, when - time.monotonic()))


class HttpConnection:
    """One endpoint's pool under one TLS policy, its requests and whether a snapshot holds it."""

    __slots__ = (
        "_backoff_task",
        "_host",
        "_owner",
        "closed",
        "connectivity",
        "held",
        "key",
        "opener",
        "policy",
        "pool",
        "requests",
        "slot",
    )

    def __init__(self, owner: HttpConnections, slot: Slot) -> None:
        self._owner = owner
        self.slot = slot
        self.key, self.policy = slot
        self._host = self.key[0].encode("ascii")
        #: requests running on this pool (their responses not yet closed)
        self.requests = 0
        self.held = False
        #: closed by its owner (unheld and unused, or all closed): it sends no more
        self.closed = False
        self.connectivity = EndpointConnectivity(owner.backoff)
        self._backoff_task: asyncio.Task[None] | None = None
        self.opener = owner._opener(self)
        self.pool = owner._pool(self.opener)

    @property
    def state(self) -> ConnectivityState:
        """This pool's connectivity."""
        return self.connectivity.state

    @property
    def scheme(self) -> bytes:
        """https under a TLS policy, else http."""
        return b"http" if self.policy is None else b"https"

    async def send(self, request: httpx.Request, timeout: float | None) -> httpx.Response:
        """Send ``request`` to this endpoint: the scheme and origin are the connection's, the
        method, path, query, headers (Host included) and body the request's; ``timeout`` caps
        each of httpcore's timeouts. The response's body is not read yet; closing it ends the
        request. httpcore's errors come out as httpx's (a failed TLS check is a
        ``ConnectError``, and so is a send on a connection already closed: ask `connect` for
        the endpoint's current one). In three steps for a caller that awaits the pool itself
        (one coroutine fewer per request): `begin`, ``pool.handle_async_request``, then
        `response`, or `failed` for what it raised."""
        core = self.begin(request, timeout)
        try:
            response = await self.pool.handle_async_request(core)
        except BaseException as error:
            raise self.failed(error, request)  # noqa: B904 - failed() gives its cause
        return self.response(response, request)

    def begin(self, request: httpx.Request, timeout: float | None) -> httpcore.Request:
        """A request starts on this pool: what to give ``pool.handle_async_request``. It has
        started only once this returns (a raise started nothing): end it with `failed` or
        the body of `response`'s answer."""
        if self.closed:
            host, port = self.key
            raise httpx.ConnectError(f"the connection to {host}:{port} is closed", request=request)
        core = self._core(request, timeout)
        self._owner.request_started(self)
        return core

    def failed(self, error: BaseException, request: httpx.Request) -> BaseException:
        """The pool raised ``error`` for ``request``: the request ended; what to raise
        (httpcore's errors as httpx's, caused by them)."""
        self._owner.request_ended(self)
        if isinstance(error, _HTTPCORE_ERRORS):
            mapped = _mapped(error, request)
            mapped.__cause__ = error
            return mapped
        return error

    def response(self, response: httpcore.Response, request: httpx.Request) -> httpx.Response:
        """The pool's ``response`` to ``request``, its body ending the request when closed
        (should wrapping it raise, the body is closed here, which ends the request)."""
        owner = self._owner
        body = ResponseBody(response.stream, request, lambda: owner.request_ended(self))
        try:
            return httpx.Response(
                status_code=response.status,
                headers=response.headers,
                stream=body,
                extensions=response.extensions,
                request=request,
            )
        except BaseException:
            owner.discard(body)
            raise

    def _core(self, request: httpx.Request, timeout: float | None) -> httpcore.Request:
        extensions = request.extensions
        given = extensions.get("timeout")
        timeouts = given or _DEFAULT_TIMEOUTS
        if timeout is not None:
            for value in timeouts.values():
                if value is None or value > timeout:  # capped: the request's own are longer
                    timeouts = {
                        name: timeout if value is None else min(value, timeout)
                        for name, value in timeouts.items()
                    }
                    break
        if timeouts is not given:  # the request's extensions stay the caller's own
            extensions = {**extensions, "timeout": timeouts}
        method = request.method.encode("ascii")
        target = request.url.raw_path
        if "target" in extensions:  # the caller's own target: httpcore's checks and rules
            url = httpcore.URL(scheme=self.scheme, host=self._host, port=self.key[1], target=target)
            return httpcore.Request(
                method, url, headers=request.headers.raw, content=request.stream,
                extensions=extensions,
            )  # fmt: skip
        return unchecked_request(
            method, self.scheme, self._host, self.key[1], target, request, extensions
        )


def unchecked_request(
    method: bytes,
    scheme: bytes,
    host: bytes,
    port: int,
    target: bytes,
    request: httpx.Request,
    extensions: dict[str, Any],
) -> httpcore.Request:
    """The httpcore request httpx's own transport makes of ``request`` (a valid httpx request:
    bytes method, URL parts and headers, a byte stream), to ``host``:``port``, without
    checking again what httpx checked (``httpcore.Request`` and ``httpcore.URL`` only convert
    and check types: every part here is already of the type they convert to)."""
    url = object.__new__(httpcore.URL)
    url.scheme, url.host, url.port, url.target = scheme, host, port, target
    core = object.__new__(httpcore.Request)
    core.method, core.url, core.headers = method, url, request.headers.raw
    core.stream, core.extensions = request.stream, extensions
    return core


class ResponseBody(httpx.AsyncByteStream):
    """A response's body: httpcore's errors as httpx's; closing it ends the request once and
    then tells ``on_close`` (when set: the exchange's attempt) whether the body was ``cut``
    short by the upstream (reading it failed; not the caller's own timeout or cancellation,
    which Envoy counts as no upstream failure once the headers came). One wrapper for the
    connection and the exchange: one layer per chunk."""

    def __init__(self, stream: Any, request: httpx.Request, ended: Callable[[], None]) -> None:
        self._stream = stream
        self._request = request
        self._ended: Callable[[], None] | None = ended
        self.cut = False
        self.on_close: Callable[[bool], None] | None = None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._stream:
                yield chunk
        except _HTTPCORE_ERRORS as error:
            self.cut = not isinstance(error, httpcore.TimeoutException)  # a reset
            raise _mapped(error, self._request) from error

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        except _HTTPCORE_ERRORS as error:
            raise _mapped(error, self._request) from error
        finally:
            ended, self._ended = self._ended, None
            if ended is not None:
                ended()
                if self.on_close is not None:
                    self.on_close(self.cut)


_ERRORS: dict[type[Exception], type[httpx.RequestError]] = {
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.PoolTimeout: httpx.PoolTimeout,
    httpcore.TimeoutException: httpx.TimeoutException,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteError: httpx.WriteError,
    httpcore.NetworkError: httpx.NetworkError,
    httpcore.LocalProtocolError: httpx.LocalProtocolError,
    httpcore.RemoteProtocolError: httpx.RemoteProtocolError,
    httpcore.ProtocolError: httpx.ProtocolError,
    httpcore.UnsupportedProtocol: httpx.UnsupportedProtocol,
}


#: the roots of every error `_ERRORS` maps
_HTTPCORE_ERRORS = (
    httpcore.ProtocolError,
    httpcore.NetworkError,
    httpcore.TimeoutException,
    httpcore.UnsupportedProtocol,
)


def _mapped(error: BaseException, request: httpx.Request) -> httpx.RequestError:
    """httpcore's ``error`` as httpx's, with the same message."""
    for kind in type(error).__mro__:
        mapped = _ERRORS.get(kind)
        if mapped is not None:
            return mapped(str(error), request=request)
    raise AssertionError(f"not one of httpcore's errors: {error!r}")  # pragma: no cover


class HttpConnections:
    """Every pool of one transport (see the module's docstring)."""

    def __init__(
        self,
        on_state: OnState,
        *,
        http1: bool = True,
        http2: bool = False,
        limits: httpx.Limits = DEFAULT_LIMITS,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        tls: TlsContexts | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        backoff: Backoff | None = None,
        network: Callable[[], httpcore.AsyncNetworkBackend] | None = None,
    ) -> None:
        self._on_state = on_state
        self.http1, self.http2 = http1, http2
        self.limits = limits
        #: the connect timeout of a connection opened ahead of any request
        self.timeout = timeout
        self.tls = tls
        self.clock: Clock = clock or _Monotonic()
        self.rng = rng or random.Random()
        self.backoff = backoff or Backoff()
        self._network = network
        #: the protocols offered in TLS handshakes (unless a policy names its own)
        self.alpn = (("h2",) if http2 else ()) + (("http/1.1",) if http1 else ())
        #: what httpcore is given: our `Opener` makes every handshake with the policy's context
        self._placeholder = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._open: dict[Slot, HttpConnection] = {}
        self._held_keys: frozenset[EndpointKey] = frozenset()
        self._held_slots: frozenset[Slot] = frozenset()
        self._reported: dict[EndpointKey, ConnectivityState] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, key: object) -> bool:
        """Whether a pool to the endpoint ``key`` is open, whatever its policy."""
        return any(slot[0] == key for slot in self._open)

    def state_of(self, key: EndpointKey) -> ConnectivityState | None:
        """What ``key`` reports (None: no pool)."""
        states = [c.state for slot, c in self._open.items() if slot[0] == key]
        return aggregate_state(states) if states else None

    def last_error(self, key: EndpointKey) -> str | None:
        """Why the last connect of a pool of ``key`` failed (None: none did, or it connected
        since)."""
        for slot, connection in self._open.items():
            if slot[0] == key and connection.opener.last_error is not None:
                return connection.opener.last_error
        return None

    def connect(self, key: EndpointKey, policy: TlsPolicy | None = None) -> HttpConnection:
        """The pool of ``key`` under ``policy``, made if there is none; an IDLE pool opens a
        connection ahead of any request (held while the snapshot holds it; otherwise it closes
        once unused, as soon as its first request ends)."""
        if self._closed:
            raise RuntimeError("the connections are closed")
        slot = (key, policy)
        connection = self._open.get(slot)
        if connection is None:
            connection = self._open[slot] = HttpConnection(self, slot)
        connection.held = self._holds(slot)
        if connection.state is ConnectivityState.IDLE:
            host, port = key
            connection.opener.open_ahead(host, port, self.timeout.connect)
        return connection

    def hold_only(self, items: Iterable[EndpointKey | Slot]) -> None:
        """The current snapshot holds exactly ``items``: endpoints (every pool of each) or
        slots (that pool only); the others close once their requests end."""
        keys: set[EndpointKey] = set()
        slots: set[Slot] = set()
        for item in items:
            if isinstance(item[0], tuple):
                slots.add(item)
            else:
                keys.add(item)
        self._held_keys, self._held_slots = frozenset(keys), frozenset(slots)
        for connection in list(self._open.values()):
            connection.held = self._holds(connection.slot)
            self._close_if_unused(connection)

    def request_started(self, connection: HttpConnection) -> None:
        """A request starts on ``connection``."""
        connection.requests += 1

    def request_ended(self, connection: HttpConnection) -> None:
        """A request on ``connection`` ended."""
        connection.requests -= 1
        self._close_if_unused(connection)

    def discard(self, body: ResponseBody) -> None:
        """Close ``body``, a response no one will read (its request ends), in a task that
        `close` awaits."""
        task = asyncio.ensure_future(_close_quietly(body))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        """Close every pool now (requests still running on them fail)."""
        self._closed = True
        for connection in list(self._open.values()):
            self._close(connection)
        while self._closing:
            await asyncio.gather(*self._closing)

    def _holds(self, slot: Slot) -> bool:
        return slot[0] in self._held_keys or slot in self._held_slots

    def _close_if_unused(self, connection: HttpConnection) -> None:
        if not connection.held and connection.requests == 0:
            self._close(connection)

    def _close(self, connection: HttpConnection) -> None:
        if self._open.get(connection.slot) is not connection:
            return
        del self._open[connection.slot]
        connection.closed = True
        if connection._backoff_task is not None:
            connection._backoff_task.cancel()
        if connection.key not in self:
            self._reported.pop(connection.key, None)
        task = asyncio.ensure_future(_close_pool(connection))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    # --- what a pool's opener reports ---

    def _opener(self, connection: HttpConnection) -> Opener:
        return Opener(
            policy=connection.policy,
            tls=self.tls,
            alpn=self.alpn,
            report=lambda event: self._event(connection, event),
            clock=self.clock.time,
            park_for=self.limits.keepalive_expiry or 0.0,
            inner=self._network() if self._network is not None else None,
        )

    def _pool(self, opener: Opener) -> httpcore.AsyncConnectionPool:
        limits = self.limits
        return httpcore.AsyncConnectionPool(
            ssl_context=self._placeholder,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=self.http1,
            http2=self.http2,
            network_backend=opener,
        )

    def _event(self, connection: HttpConnection, event: ConnectEvent) -> None:
        if self._open.get(connection.slot) is not connection:
            return  # a closed pool's late connect
        connectivity = connection.connectivity
        armed = connectivity.retry_at
        changed = connectivity.step(event, self.clock.time(), self.rng)
        if connectivity.retry_at != armed:
            if connection._backoff_task is not None:
                connection._backoff_task.cancel()
                connection._backoff_task = None
            if connectivity.retry_at is not None:
                connection._backoff_task = asyncio.ensure_future(
                    self._backoff(connection, connectivity.retry_at)
                )
        if changed is not None:
            self._report(connection.key)

    async def _backoff(self, connection: HttpConnection, until: float) -> None:
        await self.clock.sleep_until(until)
        connection._backoff_task = None
        self._event(connection, ConnectEvent.BACKOFF_ELAPSED)
        if connection.held:  # asked again at once, as gRPC's balancers reconnect an IDLE one
            host, port = connection.key
            connection.opener.open_ahead(host, port, self.timeout.connect)

    def _report(self, key: EndpointKey) -> None:
        state = self.state_of(key)
        if state is None or self._reported.get(key) is state:
            return
        self._reported[key] = state
        self._on_state(key, state)


async def _close_pool(connection: HttpConnection) -> None:
    await connection.opener.aclose()
    await connection.pool.aclose()


async def _close_quietly(body: ResponseBody) -> None:
    """Close ``body``; a failure to close it (the connection broke meanwhile) is no one's to
    hear: no one reads this response."""
    with contextlib.suppress(httpx.HTTPError):
        await body.aclose()
