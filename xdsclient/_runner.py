"""Drives one protocol `Session` over one gRPC stream, reconnecting with backoff.

Why thin: every protocol decision is the session's. This loop only waits for the first of "a
response arrived", "interest changed" and "the next deadline", feeds the session, writes what
it returns, and hands events to the dispatcher, waiting until watchers saw them before reading
the next response (flow control).

Rules (gRFC A57): the stream opens once there is interest; a stream that fails before any
response reports a connectivity error, one that ends after a response does not; backoff
grows on consecutive failures and resets once a stream received a response, in which case the
next stream opens at once. Deadlines keep firing while disconnected (TTLs expire on time).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from typing import Any

import grpc

from ._config import Backoff
from ._errors import TransportError, XdsError
from ._protocol import Session
from ._protocol._messages import DeltaDiscoveryResponse, DiscoveryResponse
from ._transport import TransportOptions, map_rpc_error
from ._watchers import Dispatcher

__all__ = ["StreamRunner"]

logger = logging.getLogger("xdsclient")


def _serialize(message: Any) -> bytes:
    data: bytes = message.SerializeToString()
    return data


class StreamRunner:
    """One stream's worth of I/O around a session."""

    def __init__(
        self,
        *,
        session: Session,
        channel: grpc.aio.Channel,
        method: str,
        server: str,
        dispatcher: Dispatcher,
        backoff: Backoff,
        transport: TransportOptions,
        uniform: Callable[[], float] = random.random,
    ) -> None:
        self.session = session
        self._channel = channel
        self._method = method
        self._server = server
        self._dispatcher = dispatcher
        self._backoff = backoff
        self._transport = transport
        self._uniform = uniform
        self._wake = asyncio.Event()
        self._response_class = DeltaDiscoveryResponse if session.delta else DiscoveryResponse

    def wake(self) -> None:
        """Interest changed: send what the session now owes."""
        self._wake.set()

    async def run(self) -> None:
        """Until cancelled: open streams, serve them, back off between failures."""
        loop = asyncio.get_running_loop()
        attempt = 0
        while True:
            await self._until_interest()
            error: XdsError | None = None
            try:
                await self._serve_stream(loop)
            except grpc.aio.AioRpcError as exc:
                error = map_rpc_error(exc, server=self._server, options=self._transport)
            except TransportError as exc:
                error = exc
            except Exception as exc:  # a bug must not end the client: report and reconnect
                logger.exception("xDS stream to %s broke unexpectedly", self._server)
                error = TransportError(f"xDS stream to {self._server} broke: {exc!r}")
            had_response = self.session.response_received
            events = self.session.disconnect(loop.time(), error)
            if error is not None:
                logger.warning("%s", error)
            await self._dispatcher.deliver(events)
            if had_response:
                attempt = 0
                continue
            delay = self._backoff.delay(attempt, self._uniform())
            attempt += 1
            await self._sleep(loop, delay)

    async def _until_interest(self) -> None:
        while not self.session.has_interest:
            self._wake.clear()
            await self._wake.wait()

    async def _sleep(self, loop: asyncio.AbstractEventLoop, delay: float) -> None:
        """Back off for ``delay`` seconds while still firing deadlines."""
        end = loop.time() + delay
        while (now := loop.time()) < end:
            deadline = self.session.next_deadline()
            until = end if deadline is None else min(end, deadline)
            await asyncio.sleep(max(0.0, until - now))
            await self._dispatcher.deliver(self.session.expire(loop.time()))

    async def _serve_stream(self, loop: asyncio.AbstractEventLoop) -> None:
        session = self.session
        call = self._channel.stream_stream(
            self._method,
            request_serializer=_serialize,
            response_deserializer=self._response_class.FromString,
        )()
        session.connect(loop.time())
        read: asyncio.Future[Any] | None = None
        try:
            await self._flush(call, loop)
            while True:
                if read is None:
                    read = asyncio.ensure_future(call.read())
                wake = asyncio.ensure_future(self._wake.wait())
                deadline = session.next_deadline()
                timeout = None if deadline is None else max(0.0, deadline - loop.time())
                try:
                    await asyncio.wait(
                        (read, wake), timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    wake.cancel()
                self._wake.clear()
                now = loop.time()
                events = session.expire(now)
                if read.done():
                    response = read.result()
                    read = None
                    if response is grpc.aio.EOF:
                        status = await call.code()
                        raise TransportError(
                            f"xDS server {self._server} ended the stream ({status.name})"
                        )
                    events.extend(session.receive(response, now))
                await self._flush(call, loop)
                await self._dispatcher.deliver(events)
        finally:
            if read is not None:
                read.cancel()
            call.cancel()

    async def _flush(self, call: Any, loop: asyncio.AbstractEventLoop) -> None:
        for request in self.session.requests_to_send(loop.time()):
            try:
                await call.write(request)
            except grpc.aio.AioRpcError:
                raise
            except Exception as exc:  # the call ended under us; its status comes with the read
                raise TransportError(
                    f"xDS stream to {self._server} closed while writing: {exc!r}"
                ) from exc
