"""The test control plane's load reporting (LRS) server: keeps every report, answers as told.

Why its own part: load reporting shares nothing with discovery but the gRPC server, so the
front end only registers its handler. Each stream's first request (the node) is answered with
what the test configured (`configure`: ``send_all_clusters`` or a cluster list, and the
interval); a later `configure` is sent at once to every open stream, as a server changing its
mind mid-stream. Every request received is kept (`requests`), the ones after a stream's first
as `reports`, so tests read what a client reported without a clock of their own.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterable
from typing import Any

import attrs
import grpc
from envoy.service.load_stats.v3 import lrs_pb2

__all__ = ["LRS_SERVICE", "LoadReportingServer", "ReceivedLoadReport"]

LRS_SERVICE = "envoy.service.load_stats.v3.LoadReportingService"


@attrs.frozen(kw_only=True)
class ReceivedLoadReport:
    """One LRS request as received: the stream it came on (numbered from 1), whether it was
    that stream's first, and the `LoadStatsRequest`."""

    stream: int
    first: bool
    message: Any


class LoadReportingServer:
    """Answers LRS streams with the configured clusters and interval; records their requests."""

    def __init__(self) -> None:
        #: every request received, in order
        self.requests: list[ReceivedLoadReport] = []
        self.send_all_clusters = True
        self.clusters: tuple[str, ...] = ()
        self.interval = 1.0
        self._ids = itertools.count(1)
        self._open: dict[int, asyncio.Queue[Any]] = {}
        self._arrived = asyncio.Event()

    @property
    def reports(self) -> list[ReceivedLoadReport]:
        """The requests after each stream's first (the node): the load reports."""
        return [r for r in self.requests if not r.first]

    @property
    def stream_count(self) -> int:
        """LRS streams open now."""
        return len(self._open)

    def configure(
        self,
        *,
        send_all_clusters: bool | None = None,
        clusters: Iterable[str] | None = None,
        interval: float | None = None,
    ) -> None:
        """What to ask of clients (a cluster list turns ``send_all_clusters`` off); sent to
        every open stream now and to each new stream after its first request."""
        if clusters is not None:
            self.clusters, self.send_all_clusters = tuple(clusters), False
        if send_all_clusters is not None:
            self.send_all_clusters = send_all_clusters
        if interval is not None:
            self.interval = interval
        for queue in self._open.values():
            queue.put_nowait(self._response())

    def end_streams(self) -> None:
        """End every open LRS stream with UNAVAILABLE (the client should reconnect)."""
        for queue in self._open.values():
            queue.put_nowait(None)

    async def wait_for_stream(self, count: int) -> None:
        """Until ``count`` streams have sent their first request (bound it with a timeout)."""
        while sum(r.first for r in self.requests) < count:
            self._arrived.clear()
            await self._arrived.wait()

    def handler(self) -> grpc.GenericRpcHandler:
        """The gRPC handler of the LRS service, to add to a server."""
        method = grpc.stream_stream_rpc_method_handler(
            self._serve,
            request_deserializer=lrs_pb2.LoadStatsRequest.FromString,
            response_serializer=lrs_pb2.LoadStatsResponse.SerializeToString,
        )
        return grpc.method_handlers_generic_handler(LRS_SERVICE, {"StreamLoadStats": method})

    def _response(self) -> Any:
        response = lrs_pb2.LoadStatsResponse(
            send_all_clusters=self.send_all_clusters,
            clusters=[] if self.send_all_clusters else self.clusters,
        )
        response.load_reporting_interval.FromNanoseconds(round(self.interval * 1e9))
        return response

    async def _serve(self, requests: AsyncIterator[Any], context: Any) -> None:
        stream = next(self._ids)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._open[stream] = queue
        reader = asyncio.create_task(self._read(stream, requests, queue))
        try:
            while (response := await queue.get()) is not None:
                await context.write(response)
            if not reader.done():
                await context.abort(grpc.StatusCode.UNAVAILABLE, "LRS stream ended by the test")
        finally:
            self._open.pop(stream, None)
            reader.cancel()

    async def _read(self, stream: int, requests: AsyncIterator[Any], queue: Any) -> None:
        first = True
        try:
            async for request in requests:
                self.requests.append(
                    ReceivedLoadReport(stream=stream, first=first, message=request)
                )
                if first:
                    queue.put_nowait(self._response())
                first = False
                self._arrived.set()
        finally:
            queue.put_nowait(None)
