"""Out-of-band ORCA load reports (gRFCs A51, A58): one ``StreamCoreMetrics`` stream per READY
endpoint of a weighted-round-robin cluster that asks for them (``enable_oob_load_report``).

Why out of band: grpcio's C-core consumes the per-call ``endpoint-load-metrics-bin`` trailer and
never publishes it to Python, so a grpc.aio channel cannot read per-call reports; the
``xds.service.orca.v3.OpenRcaService`` stream is an ordinary RPC whose messages are the same
``OrcaLoadReport``. Rules (C-core's ORCA producer): the stream asks for the endpoint's
``oob_reporting_period`` (the shortest of the clusters holding it) and starts once the
endpoint's connection is READY; each report goes to the picker (`ComposedPicker.load_report`);
a stream that ends (UNIMPLEMENTED from a backend without the service, or the connection lost)
is started again only after the connection leaves READY and comes back; a stream for an
endpoint no cluster wants any more is cancelled, and one whose period changed is cancelled and
asked for again with the new period (C-core's producer sends a new request when the interval
its watchers want changes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

import grpc
from google.protobuf import duration_pb2
from xds.data.orca.v3 import orca_load_report_pb2
from xds.service.orca.v3 import orca_pb2

from ..lb import ConnectivityState, EndpointKey

__all__ = ["STREAM_CORE_METRICS", "OobStreams"]

logger = logging.getLogger("xdsclient.grpc")

#: The ORCA service's streaming method.
STREAM_CORE_METRICS = "/xds.service.orca.v3.OpenRcaService/StreamCoreMetrics"
_READY = ConnectivityState.READY


class OobStreams:
    """The out-of-band ORCA streams of one channel; ``deliver(key, report)`` gets each
    report."""

    def __init__(self, deliver: Callable[[EndpointKey, Any], None]) -> None:
        self._deliver = deliver
        #: endpoint -> reporting period, for the endpoints whose clusters ask for reports
        self.wanted: Mapping[EndpointKey, float] = {}
        self._tasks: dict[EndpointKey, asyncio.Task[None]] = {}
        #: the period each running stream asked for
        self._periods: dict[EndpointKey, float] = {}
        #: endpoints whose stream ended while their connection stayed READY
        self._ended: set[EndpointKey] = set()

    def want(self, wanted: Mapping[EndpointKey, float]) -> list[EndpointKey]:
        """The endpoints that want reports now, each with its period: the streams of the
        others, and those asking for another period, are cancelled; returns the wanted
        endpoints without a stream (to `connectivity` if connected)."""
        self.wanted = wanted
        for key in [key for key in self._tasks if wanted.get(key) != self._periods[key]]:
            self._tasks.pop(key).cancel()
            del self._periods[key]
            self._ended.discard(key)  # a new period is a new request
        self._ended.intersection_update(wanted)
        return [key for key in wanted if key not in self._tasks]

    def connectivity(
        self,
        key: EndpointKey,
        state: ConnectivityState,
        channel_of: Callable[[], grpc.aio.Channel | None],
    ) -> None:
        """Endpoint ``key``'s connection is in ``state``: a stream starts when it is READY
        and wanted (once per time it is READY), on the channel ``channel_of()`` gives."""
        period = self.wanted.get(key)
        if period is None:
            return
        if state is not _READY:
            self._ended.discard(key)
            return
        if key in self._tasks or key in self._ended:
            return
        channel = channel_of()
        if channel is not None:
            self._tasks[key] = asyncio.ensure_future(self._stream(key, channel, period))
            self._periods[key] = period

    async def _stream(self, key: EndpointKey, channel: grpc.aio.Channel, period: float) -> None:
        interval = duration_pb2.Duration()
        interval.FromNanoseconds(int(period * 1e9))
        request = orca_pb2.OrcaLoadReportRequest(report_interval=interval)
        stream = channel.unary_stream(
            STREAM_CORE_METRICS,
            request_serializer=orca_pb2.OrcaLoadReportRequest.SerializeToString,
            response_deserializer=orca_load_report_pb2.OrcaLoadReport.FromString,
        )
        try:
            async for report in stream(request):
                self._deliver(key, report)
        except grpc.aio.AioRpcError as error:
            logger.debug("ORCA stream to %s:%s ended: %s", *key, error.code())
        finally:
            if self._tasks.get(key) is asyncio.current_task():
                del self._tasks[key]
                del self._periods[key]
                self._ended.add(key)

    async def close(self) -> None:
        """Cancel every stream and wait for them."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        self._periods.clear()
        self.wanted = {}
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
