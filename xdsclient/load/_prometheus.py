"""A Prometheus endpoint while a load run goes on (``--metrics-port``).

Why: a run of many minutes against a control plane is watched in the same Grafana as the
control plane itself, so the generator's view (clients connected and complete, NACKs, errors,
latencies) can sit beside the server's CPU and push queue on one time axis.

Why a collector over snapshots, not ``prometheus_client`` metrics updated per event: the run
already keeps everything in its own full-precision histograms and counters; recording each
value twice would cost the hot path. Instead each `Progress` snapshot (every half second) is
copied here on the run's loop, and a scrape, on the server's own thread, reads only that copy,
never the run's live objects. Histograms are exposed with fixed ``le`` bounds (`BOUNDS`),
counted from our buckets (exact to their 0.1 %). The server listens on 127.0.0.1 unless told
otherwise, on its own registry (never the process-wide default one).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from .._errors import MissingExtraError, XdsError
from ._results import Histogram, Progress, RunResult, _upper

__all__ = ["BOUNDS", "MetricsError", "MetricsServer"]

#: the ``le`` bounds (seconds) of every exposed histogram
BOUNDS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
          1.0, 2.5, 5.0, 10.0, 30.0, 60.0)  # fmt: skip
_PREFIX = "xdsclient_load_"
_LATEST = {
    "connect": "latest_connect",
    "first_config": "latest_first_config",
    "ack_latency": "latest_ack_latency",
    "push_to_applied": "latest_push_to_applied",
}
_HELP = {
    "connect": "Dial to channel ready, per connection made",
    "first_config": "Client start to its first complete configuration",
    "fanout": "First client to receive a version of a resource to each other client receiving it",
    "push_to_applied": "A push to each client applying a resource it changed",
    "ack_latency": "A response read to its ACK or NACK written, inside the client",
}


class MetricsError(XdsError, OSError):
    """The metrics endpoint could not listen (the port is taken, the address is not ours)."""


@attrs.frozen
class _Buckets:
    """A histogram's state at one snapshot: cumulative counts at each bound, count, sum."""

    cumulative: tuple[int, ...]
    count: int
    sum: float

    @classmethod
    def of(cls, histogram: Histogram) -> _Buckets:
        """The counts of ``histogram`` now: a value counts under a bound when its whole
        bucket lies at or below it (``to_dict`` gives the buckets as plain data)."""
        data = histogram.to_dict()
        uppers = [(_upper(index) / 1e9, count) for index, count in data["buckets"]]
        cumulative = tuple(sum(c for upper, c in uppers if upper <= bound) for bound in BOUNDS)
        return cls(cumulative, histogram.count, histogram.sum)


@attrs.frozen
class _Snapshot:
    progress: Progress | None = None
    histograms: Mapping[str, _Buckets] = attrs.Factory(dict)
    errors: Mapping[str, int] = attrs.Factory(dict)


class MetricsServer:
    """The endpoint: ``start`` it, call it with each `Progress` (an ``on_progress``
    callback), give it the final `RunResult` with `finish`, and `close` it.

    ``port`` 0 picks a free one (`port` tells which after `start`). ``total`` is the number of
    clients the run will start (``xdsclient_load_clients{state="target"}``).
    """

    def __init__(self, port: int, *, host: str = "127.0.0.1", total: int = 0) -> None:
        self.host = host
        self.total = total
        self._requested_port = port
        self._snapshot = _Snapshot()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port it listens on (after `start`)."""
        if self._server is None:
            return self._requested_port
        return int(self._server.server_port)

    @property
    def url(self) -> str:
        """Where to scrape, ``http://HOST:PORT/metrics``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def start(self) -> None:
        """Listen (on a daemon thread); `MetricsError` when it cannot."""
        try:
            from prometheus_client import CollectorRegistry, start_http_server
        except ImportError:
            raise MissingExtraError(
                "--metrics-port needs prometheus-client: pip install 'xdsclient[load]'"
            ) from None
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self))
        try:
            self._server, self._thread = start_http_server(
                self._requested_port, addr=self.host, registry=registry
            )
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise MetricsError(
                f"--metrics-port {self._requested_port}: cannot listen on {self.host}: {reason}"
            ) from None

    def __call__(self, progress: Progress) -> None:
        """Take a snapshot (on the run's loop: the histograms are copied here)."""
        histograms = progress.histograms
        buckets = ({name: _Buckets.of(h) for name, h in histograms.items()}
                   if histograms is not None else self._snapshot.histograms)  # fmt: skip
        self._snapshot = _Snapshot(progress, buckets, self._snapshot.errors)

    def finish(self, result: RunResult) -> None:
        """The run's final numbers: every histogram and the errors by status."""
        histograms = {name: _Buckets.of(h) for name, h in result.histograms().items()}
        self._snapshot = _Snapshot(self._snapshot.progress, histograms, dict(result.errors))

    def close(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def collect(self) -> Iterator[Any]:
        """The metric families of the latest snapshot (what a scrape returns)."""
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        snapshot = self._snapshot  # one read: the scrape sees one consistent snapshot
        progress = snapshot.progress
        clients = GaugeMetricFamily(f"{_PREFIX}clients", "Simulated clients, by state",
                                    labels=["state"])  # fmt: skip
        clients.add_metric(["target"], self.total)
        if progress is not None:
            for state in ("started", "connected", "complete"):
                clients.add_metric([state], getattr(progress, state))
        yield clients
        if progress is not None:
            yield GaugeMetricFamily(f"{_PREFIX}elapsed_seconds", "Seconds since the run started",
                                    value=progress.elapsed)  # fmt: skip
            yield GaugeMetricFamily(f"{_PREFIX}done", "1 once the run has ended",
                                    value=1 if progress.done else 0)  # fmt: skip
            for name, help_text in (
                ("reconnects", "Streams opened after each client's first"),
                ("nacks", "NACKs the clients sent"),
                ("stream_errors", "Streams that ended with an error status"),
            ):
                value = getattr(progress, "errors" if name == "stream_errors" else name)
                yield CounterMetricFamily(f"{_PREFIX}{name}", help_text, value=value)
            latest = GaugeMetricFamily(f"{_PREFIX}latest_seconds",
                                       "The latest value recorded of each latency",
                                       labels=["measure"])  # fmt: skip
            for measure, field in _LATEST.items():
                value = getattr(progress, field)
                if value is not None:
                    latest.add_metric([measure], value)
            yield latest
        if snapshot.errors:
            errors = CounterMetricFamily(f"{_PREFIX}stream_errors_by_status",
                                         "Stream failures by gRPC status (at the end of the run)",
                                         labels=["status"])  # fmt: skip
            for status, count in sorted(snapshot.errors.items()):
                errors.add_metric([status], count)
            yield errors
        for name, buckets in snapshot.histograms.items():
            family = HistogramMetricFamily(f"{_PREFIX}{name}_seconds", _HELP.get(name, name))
            points = [
                (_le(bound), float(count))
                for bound, count in zip(BOUNDS, buckets.cumulative, strict=True)
            ]
            points.append(("+Inf", float(buckets.count)))
            family.add_metric([], points, buckets.sum)
            yield family


class _Collector:
    """The registry's view of a `MetricsServer` (its ``collect``)."""

    def __init__(self, server: MetricsServer) -> None:
        self._server = server

    def collect(self) -> Iterator[Any]:
        return self._server.collect()


def _le(bound: float) -> str:
    return repr(bound)
