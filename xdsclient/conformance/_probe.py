"""A raw xDS stream for the checker: it writes exactly the requests a rule needs (stale nonces,
phantom unsubscribes, unknown types) and records every message both ways as evidence.

Why not `XdsClient`: the client is too well behaved to ask what a rule asks. A reader task
moves responses into a queue, so waiting for "no response within the quiet window" never
cancels the call (cancelling a grpc.aio read cancels the RPC).

Invariant: every way a stream can fail, on a write or a read (a status from the server, a
call already finished, a broken connection), surfaces as one `StreamEnded` carrying the
server's status, never as a grpc exception: a server that ends a stream at once (an
UNIMPLEMENTED service) must read the same whether our write or our read noticed first.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import grpc
from google.protobuf import text_format

from .._protocol._messages import (
    DeltaDiscoveryRequest,
    DeltaDiscoveryResponse,
    DiscoveryRequest,
    DiscoveryResponse,
)
from .._protocol._services import ADS_SERVICE, PER_TYPE_SERVICES
from ._rules import RuleId

__all__ = ["Probe", "StreamEnded", "brief"]

_END = object()
#: seconds to wait, after a failed write, for the reader to see the status the call ended with
_SETTLE = 5.0


class StreamEnded(Exception):
    """The server ended the stream: ``code`` is the gRPC status name when it gave one."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


def brief(message: Any, limit: int = 600) -> str:
    """A message as one line of text format, cut to ``limit`` characters, for evidence."""
    text = text_format.MessageToString(message, as_one_line=True)
    return text if len(text) <= limit else text[:limit] + " ..."


class Probe:
    """One stream of one variant: ``ads`` or per-type, SotW or Delta."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        *,
        ads: bool,
        delta: bool,
        type_url: str,
        node: Any,
        node_every_request: bool = False,
    ) -> None:
        """``node_every_request``: send the node on every request, not only the first (for a
        server that ignores requests without one, so other rules can still be checked)."""
        service = (
            ADS_SERVICE
            if ads
            else next(s for s in PER_TYPE_SERVICES.values() if s.type_url == type_url)
        )
        method = service.delta_method if delta else service.sotw_method
        self.delta = delta
        self._node = node
        self._node_sent = False
        self._node_every_request = node_every_request
        request_class = DeltaDiscoveryRequest if delta else DiscoveryRequest
        response_class = DeltaDiscoveryResponse if delta else DiscoveryResponse
        self._call = channel.stream_stream(
            f"/{service.name}/{method}",
            request_serializer=request_class.SerializeToString,
            response_deserializer=response_class.FromString,
        )()
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._reader = asyncio.ensure_future(self._read())
        #: every message, in order: ("->" or "<-", seconds since the probe started, message)
        self.log: list[tuple[str, float, Any]] = []
        self._start = time.monotonic()
        self.ended: str | None = None
        #: the gRPC status name the stream ended with, when it ended with one
        self.code: str | None = None
        #: a write failed because the stream had ended (so ``code`` may be gRPC's, not the
        #: server's)
        self.unwritten = False
        #: per type URL: the last nonce received and the last version ACKed (SotW requests
        #: restate them, as a client does)
        self.nonces: dict[str, str] = {}
        self.acked: dict[str, str] = {}
        #: the rule the script is checking now: if the stream ends here, that rule failed
        #: (None: the script judges a stream's end itself)
        self.step: RuleId | None = RuleId.INITIAL_REQUEST_ANSWERED

    async def _read(self) -> None:
        try:
            async for response in self._call:
                self._queue.put_nowait(response)
        except grpc.aio.AioRpcError as exc:
            self.code = exc.code().name
            self.ended = f"{exc.code().name}: {exc.details()}"
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the call broke in some other way: the stream is over
            self.ended = repr(exc)
        finally:
            if self.ended is None:
                self.ended = "the server closed the stream"
            self._queue.put_nowait(_END)

    async def send(self, **fields: Any) -> Any:
        """Write a request (node on the first one only); returns it."""
        request = (DeltaDiscoveryRequest if self.delta else DiscoveryRequest)(**fields)
        if not self._node_sent or self._node_every_request:
            request.node.CopyFrom(self._node)
            self._node_sent = True
        self.log.append(("->", time.monotonic() - self._start, request))
        try:
            await self._call.write(request)
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError, grpc.aio.UsageError) as exc:
            # The call is over: wait for the reader to record its status. When the server ended
            # the call while our write was under way, gRPC reports its own INTERNAL error and
            # the server's status is lost: `unwritten` says so, and `ended_within` on a fresh
            # probe that writes nothing reads the real one.
            await asyncio.wait([self._reader], timeout=_SETTLE)
            self.unwritten = True
            self.ended = f"{self.ended or repr(exc)} (before our request was written)"
            raise StreamEnded(self.ended, self.code) from None
        return request

    async def ended_within(self, timeout: float) -> bool:
        """Whether the server ends the stream within ``timeout`` seconds, with nothing
        written (`code` and `ended` then say how)."""
        await asyncio.wait([self._reader], timeout=timeout)
        return self._reader.done()

    async def recv(self, timeout: float) -> Any | None:
        """The next response, or None when none came within ``timeout`` seconds;
        `StreamEnded` when the stream is over."""
        try:
            item = await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return None
        if item is _END:
            self._queue.put_nowait(_END)
            raise StreamEnded(self.ended or "ended", self.code)
        self.log.append(("<-", time.monotonic() - self._start, item))
        self.nonces[item.type_url] = item.nonce
        return item

    async def ack(self, response: Any, **fields: Any) -> Any:
        """ACK ``response`` (SotW: its version and the given names)."""
        if self.delta:
            return await self.send(type_url=response.type_url, response_nonce=response.nonce)
        self.acked[response.type_url] = response.version_info
        return await self.send(
            type_url=response.type_url,
            version_info=response.version_info,
            response_nonce=response.nonce,
            **fields,
        )

    def evidence(self, last: int = 4) -> str:
        """The last messages of the stream, one per line."""
        lines = [f"{arrow} +{at:.3f}s {brief(message)}" for arrow, at, message in self.log[-last:]]
        if self.ended:
            lines.append(f"stream ended: {self.ended}")
        return "\n".join(lines)

    async def close(self) -> None:
        self._call.cancel()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader
