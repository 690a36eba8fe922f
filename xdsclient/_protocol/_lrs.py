"""Load reporting (LRS, gRFC A27): the sans-I/O protocol of one LoadReportingService stream.

Why a protocol object: the stream driver (`_shell/_driver.py`) runs any `StreamProtocol`, so
load reporting is only its decisions, time passed in, with the driver's reconnect and backoff:
- the first request of each stream carries the node, with the client features
  ``envoy.lb.does_not_support_overprovisioning`` and ``envoy.lrs.supports_send_all_clusters``
  (as C-core's), and no stats;
- each `LoadStatsResponse` says which clusters to report (``send_all_clusters`` or a list) and
  how often (``load_reporting_interval``, at least 1 s: our floor, so a zero interval cannot
  spin); the next report is due one interval after the response;
- a report is a `LoadStatsRequest` with one ``cluster_stats`` per (cluster, EDS service) with
  something to say (`LoadStore.snapshot`), sent every interval while the stream is up, except
  that a report with nothing to say is skipped when the stream's previous report had nothing
  either (as gRPC C-core's LRS client does: one empty report after load stops, then quiet
  until there is load again; each stream starts as if its last report had something);
- a stream that ends stops the reports; the store is not touched, so the counts made while
  disconnected go in the first report of the next stream (a report taken is lost only if its
  write fails). A new stream waits for the server's answer again before reporting.
"""

from __future__ import annotations

from typing import Any

from envoy.config.core.v3 import base_pb2
from envoy.config.endpoint.v3 import load_report_pb2
from envoy.service.load_stats.v3 import lrs_pb2

from .._errors import TransportError
from ._load_store import ClusterLoadReport, LoadStore

__all__ = ["LRS_METHOD", "NO_OVERPROVISIONING", "SEND_ALL_CLUSTERS", "LoadReporting"]

LRS_METHOD = "/envoy.service.load_stats.v3.LoadReportingService/StreamLoadStats"
#: The client feature that tells the server it may answer ``send_all_clusters``.
SEND_ALL_CLUSTERS = "envoy.lrs.supports_send_all_clusters"
#: The client feature that says the client ignores EDS ``overprovisioning_factor`` (gRFC A27);
#: C-core sends it in the node of every stream, discovery and LRS.
NO_OVERPROVISIONING = "envoy.lb.does_not_support_overprovisioning"
#: The shortest interval followed, so a server's zero cannot make the client spin.
MIN_INTERVAL = 1.0


class LoadReporting:
    """One LRS stream's decisions over a `LoadStore` (the driver's `StreamProtocol`)."""

    def __init__(self, *, node: Any, store: LoadStore) -> None:
        """``node``: the client's ``Node`` message (the LRS feature is added to a copy)."""
        self._node = base_pb2.Node()
        self._node.CopyFrom(node)
        for feature in (NO_OVERPROVISIONING, SEND_ALL_CLUSTERS):  # C-core's order
            if feature not in self._node.client_features:
                self._node.client_features.append(feature)
        self.store = store
        self.response_received = False
        self._connected = False
        self._node_sent = False
        #: None: every cluster (``send_all_clusters``); otherwise the server's list
        self.clusters: frozenset[str] | None = frozenset()
        #: seconds between reports, as the server last said (0: not said yet on this stream)
        self.interval = 0.0
        self._due: float | None = None
        #: the last report this stream took had nothing to say
        self._last_empty = False

    @property
    def has_interest(self) -> bool:
        """A stream is wanted once anything is counted."""
        return bool(self.store)

    def connect(self, now: float) -> None:
        self._connected, self._node_sent, self.response_received = True, False, False
        self._last_empty = False

    def requests_to_send(self, now: float) -> list[Any]:
        if not self._connected:
            return []
        if not self._node_sent:
            self._node_sent = True
            return [lrs_pb2.LoadStatsRequest(node=self._node)]
        if self._due is None or now < self._due:
            return []
        self._due = now + self.interval
        reports = self.store.snapshot(now, self.clusters)
        skip = self._last_empty and not reports
        self._last_empty = not reports
        return [] if skip else [_request(reports)]

    def receive(self, message: Any, now: float, raw: bytes | None = None) -> list[Any]:
        self.response_received = True
        self.clusters = None if message.send_all_clusters else frozenset(message.clusters)
        interval = message.load_reporting_interval
        self.interval = max(MIN_INTERVAL, interval.seconds + interval.nanos / 1e9)
        self._due = now + self.interval
        return []

    def next_deadline(self) -> float | None:
        return self._due

    def expire(self, now: float) -> list[Any]:
        return []  # a report that is due goes out with the next requests_to_send

    def disconnect(self, now: float, error: TransportError | None, *, report: bool) -> list[Any]:
        self._connected, self._due, self.interval = False, None, 0.0
        return []


def _request(reports: list[ClusterLoadReport]) -> Any:
    request = lrs_pb2.LoadStatsRequest()
    for report in reports:
        stats = request.cluster_stats.add(
            cluster_name=report.cluster,
            cluster_service_name=report.service,
            total_dropped_requests=report.total_dropped,
        )
        stats.load_report_interval.FromNanoseconds(round(report.interval * 1e9))
        for category, count in report.dropped:
            stats.dropped_requests.add(category=category, dropped_count=count)
        for locality in report.localities:
            upstream = stats.upstream_locality_stats.add(
                total_successful_requests=locality.succeeded,
                total_requests_in_progress=locality.in_progress,
                total_error_requests=locality.errored,
                total_issued_requests=locality.issued,
            )
            where = locality.locality
            upstream.locality.CopyFrom(
                base_pb2.Locality(region=where.region, zone=where.zone, sub_zone=where.sub_zone)
            )
            for metric in locality.metrics:
                upstream.load_metric_stats.append(
                    load_report_pb2.EndpointLoadMetricStats(
                        metric_name=metric.name,
                        num_requests_finished_with_metric=metric.count,
                        total_metric_value=metric.total,
                    )
                )
    return request
