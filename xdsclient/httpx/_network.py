"""How a pool's connections are opened: TCP, then TLS under the cluster's policy with its checks,
each connect told to the pool's owner; and the one connection opened ahead of any request.

Why a network backend of our own (httpcore's ``AsyncNetworkBackend``, wrapping its default):
it is the one place that sees every connect of a pool, so the endpoint's connectivity follows
real connects (`_connectivity.py`); it makes the TLS handshake itself, so the context is the
policy's current one (a rotation reaches the next connect), the SNI is the policy's (none when
unset, whatever host the URL names), and the subject-alt-name matchers are checked before the
connection is handed to httpcore. A check that fails closes the connection and raises
httpcore's ``ConnectError`` naming the matchers and the SANs seen: a connect failure, which is
what the retry policy and outlier detection see.

A connection opened ahead (`Opener.open_ahead`) is parked until the pool's first connect takes
it, so the handshake done before a request is not done twice; a parked connection parked longer
than the keep-alive expiry, or (in plaintext) one the server closed meanwhile, is dropped for a
new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import typing
from collections.abc import Callable, Iterable
from typing import Any

import httpcore

from .._plane._tls_policy import TlsError, TlsPolicy
from ._connectivity import ConnectEvent
from ._tls import TlsContexts, check_peer

__all__ = ["Opener"]

SocketOption = Any


class _Opened(httpcore.AsyncNetworkStream):
    """A connection whose handshake is done: httpcore's own ``start_tls`` returns it as is."""

    def __init__(self, stream: httpcore.AsyncNetworkStream) -> None:
        self._stream = stream

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._stream.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._stream.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return self

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class Opener(httpcore.AsyncNetworkBackend):
    """The network backend of one pool: an endpoint under one TLS policy (None: plaintext)."""

    def __init__(
        self,
        *,
        policy: TlsPolicy | None,
        tls: TlsContexts | None,
        alpn: tuple[str, ...],
        report: Callable[[ConnectEvent], None],
        clock: Callable[[], float],
        park_for: float,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self._policy = policy
        self._tls = tls
        self._alpn = alpn
        self._report = report
        #: why the last connect failed (None: it did not)
        self.last_error: str | None = None
        self._clock = clock
        self._park_for = park_for
        self._inner = inner or httpcore.AnyIOBackend()
        self._parked: tuple[httpcore.AsyncNetworkStream, float] | None = None
        self._ahead: asyncio.Future[None] | None = None
        #: why the last connect made ahead failed (given to the requests that waited for it)
        self._ahead_error: Exception | None = None

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """A parked connection, or a new one (TCP, TLS and its checks); while a connect made
        ahead runs, its outcome (waited for no longer than ``timeout``)."""
        ahead = self._ahead
        if ahead is not None and not ahead.done():
            try:
                await asyncio.wait_for(asyncio.shield(ahead), timeout)
            except TimeoutError:
                raise httpcore.ConnectTimeout("timed out waiting for the connect") from None
            if self._ahead_error is not None:
                raise type(self._ahead_error)(str(self._ahead_error))
        parked = await self._take_parked()
        if parked is not None:
            return parked
        return await self.open(host, port, timeout, local_address, socket_options)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: typing.Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Not used: endpoints are TCP addresses."""
        raise httpcore.UnsupportedProtocol("xDS endpoints are TCP addresses")

    async def sleep(self, seconds: float) -> None:
        """httpcore's retries' sleep."""
        await self._inner.sleep(seconds)

    async def open(
        self,
        host: str,
        port: int,
        timeout: float | None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Connect and, under a policy, make the handshake and check the server; each step's
        outcome is reported. A plaintext connection is httpcore's own stream (nothing to
        wrap: httpcore starts no TLS on an ``http`` URL)."""
        self._report(ConnectEvent.STARTED)
        stream: httpcore.AsyncNetworkStream | None = None
        try:
            stream = await self._inner.connect_tcp(
                host, port, timeout, local_address, socket_options
            )
            if self._policy is not None:
                stream = await self._handshake(stream, self._policy, timeout)
        except BaseException as error:
            if stream is not None:
                with contextlib.suppress(Exception):
                    await stream.aclose()
            self.last_error = f"TLS: {error}" if isinstance(error, TlsError) else str(error)
            self._report(ConnectEvent.FAILED)
            if isinstance(error, TlsError):
                raise httpcore.ConnectError(f"TLS: {error}") from error
            raise
        self.last_error = None
        self._report(ConnectEvent.CONNECTED)
        return stream if self._policy is None else _Opened(stream)

    async def _handshake(
        self, stream: httpcore.AsyncNetworkStream, policy: TlsPolicy, timeout: float | None
    ) -> httpcore.AsyncNetworkStream:
        if self._tls is None:
            raise TlsError("a TLS policy needs certificates")
        context = self._tls.context(policy, self._alpn)
        stream = await stream.start_tls(context, policy.sni or None, timeout)
        try:
            check_peer(policy, stream.get_extra_info("ssl_object"))
        except TlsError:
            with contextlib.suppress(Exception):
                await stream.aclose()
            raise
        return stream

    def open_ahead(self, host: str, port: int, timeout: float | None) -> None:
        """Start a connection ahead of any request (unless one is parked or under way)."""
        if self._parked is not None or (self._ahead is not None and not self._ahead.done()):
            return
        self._ahead = asyncio.ensure_future(self._open_ahead(host, port, timeout))

    async def _open_ahead(self, host: str, port: int, timeout: float | None) -> None:
        self._ahead_error = None
        try:
            self._parked = (await self.open(host, port, timeout), self._clock())
        except Exception as error:  # reported as FAILED, and raised to requests waiting
            self._ahead_error = error

    async def _take_parked(self) -> httpcore.AsyncNetworkStream | None:
        parked, self._parked = self._parked, None
        if parked is None:
            return None
        stream, since = parked
        if self._clock() - since < self._park_for and not self._closed_by_peer(stream):
            return stream
        with contextlib.suppress(Exception):
            await stream.aclose()  # closed by the server, or kept too long
        return None

    def _closed_by_peer(self, stream: httpcore.AsyncNetworkStream) -> bool:
        """Whether a parked plaintext connection was closed by the server (its socket is
        readable before anything was sent). A TLS 1.3 server sends session tickets after the
        handshake, so a parked TLS connection is readable anyway: only its age counts."""
        return self._policy is None and bool(stream.get_extra_info("is_readable"))

    async def aclose(self) -> None:
        """Stop a connect made ahead and close a parked connection."""
        if self._ahead is not None:
            self._ahead.cancel()
            with contextlib.suppress(BaseException):
                await self._ahead
        parked, self._parked = self._parked, None
        if parked is not None:
            with contextlib.suppress(Exception):
                await parked[0].aclose()
