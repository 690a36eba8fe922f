"""`XdsTransport`: an httpx transport whose requests go where the xDS configuration says.

Why a transport and not a client: httpx's clients (``httpx.AsyncClient``) keep their own API,
cookies, redirects and auth, and hand each request to a transport; this one routes, balances,
retries and load-reports it by the listener's configuration (Envoy's HTTP router's rules), so
``client.get("http://reviews/api/v1/...")`` is proxyless HTTP with no other change. It only
wires the parts: `HttpCore` (configurations per authority, picker, connections, load
reporters) and one `Exchange` per request.
"""

from __future__ import annotations

import random
from collections.abc import Coroutine
from types import TracebackType
from typing import Any

import httpx

from .. import Clock, XdsClient
from ._connections import DEFAULT_LIMITS
from ._core import IDLE_TIMEOUT, MAX_AUTHORITIES, HttpCore
from ._exchange import Exchange

__all__ = ["XdsTransport"]


async def _closed() -> httpx.Response:
    raise RuntimeError("the XdsTransport is closed")


class XdsTransport(httpx.AsyncBaseTransport):
    """An httpx async transport over the xDS configuration of ``listener``:

        transport = XdsTransport(listener="edge", client=client)
        async with httpx.AsyncClient(transport=transport) as http:
            r = await http.get("http://reviews.default.svc/api/v1/products/7")

    Each request is routed by its authority (the Host header) and path with Envoy's virtual
    host and route rules, answered locally where the route says so (direct response, redirect,
    a fault's abort; 404 for no virtual host or route, 503 when no endpoint can take it, 504
    when the route's timeout passes, each naming why in the ``x-xdsclient-error`` header),
    retried by the route's retry policy, balanced by the cluster's policy over the endpoints
    (`xdsclient.lb`: the gRPC channel's), and counted in the cluster's load report when it has
    ``lrs_server``. The response body is streamed.

    With no ``client``, the transport makes an `XdsClient` from the bootstrap (as
    `xdsclient.grpc.XdsChannel` does) and closes it with itself (`aclose`); a ``client`` given
    is shared and left open. ``http1``, ``http2``: the protocols spoken to the endpoints (both:
    HTTP/2 where TLS's ALPN agrees; only ``http2`` in plaintext: prior knowledge); ``limits``:
    each endpoint's pool's (httpx's). A cluster with an ``UpstreamTlsContext`` gets TLS from
    the bootstrap's certificate providers, its subject alt names checked. ``rng`` seeds every
    random choice (weighted clusters, faults, retries' jitter, picks). ``idle_timeout``: how
    long the configuration of an authority is kept after its last request (seconds).
    ``max_authorities``: how many authorities (Host headers, each a config watch) are kept at
    once; a new one past it replaces the least recently used with no request running, or,
    when each has one, is answered 503 naming the cap.
    """

    def __init__(
        self,
        listener: str,
        *,
        client: XdsClient | None = None,
        http1: bool = True,
        http2: bool = False,
        limits: httpx.Limits = DEFAULT_LIMITS,
        rng: random.Random | None = None,
        idle_timeout: float = IDLE_TIMEOUT,
        max_authorities: int = MAX_AUTHORITIES,
        _clock: Clock | None = None,
    ) -> None:
        # _clock: for tests (`xdsclient.testing.FakeClock`), as ``XdsClient(clock=...)``: the
        # transport reads time and waits on it alone (outlier detection, retries' back-off,
        # idle authorities, connection back-off, certificate refresh)
        owns = client is None
        self._core = HttpCore(
            listener,
            client if client is not None else XdsClient(),
            owns_client=owns,
            rng=rng if rng is not None else random.Random(),
            clock=_clock,
            http1=http1,
            http2=http2,
            limits=limits,
            idle_timeout=idle_timeout,
            max_authorities=max_authorities,
        )

    @property
    def client(self) -> XdsClient:
        """The `XdsClient` the transport reads its configuration from."""
        return self._core.client

    @property
    def listener(self) -> str:
        """The listener whose configuration routes the requests."""
        return self._core.listener

    async def __aenter__(self) -> XdsTransport:
        await self._core.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        await self.aclose()

    def handle_async_request(self, request: httpx.Request) -> Coroutine[Any, Any, httpx.Response]:
        """Route, send (and retry) ``request``; its response, or a local answer. (The
        exchange's own coroutine, awaited by httpx: one coroutine fewer per request.)"""
        if self._core.closed:
            return _closed()
        return Exchange(self._core, request).run()

    async def aclose(self) -> None:
        """Stop watching, close every connection and the client the transport made."""
        await self._core.close()
