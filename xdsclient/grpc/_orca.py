"""The backend's per-call load report (gRFC A51): the ``endpoint-load-metrics-bin`` trailer.

Why read it here: a backend using ORCA attaches an ``xds.data.orca.v3.OrcaLoadReport`` to each
call's trailers; gRPC hands it to the balancing policy that picked the call (weighted round
robin takes its weights from it, gRFC A58; a custom policy gets it in its ``call_ended`` hook)
and, for a cluster that reports load, adds its ``named_metrics`` to the locality's
``load_metric_stats`` (gRFC A64, as C-core does by default: each name as sent, summed and
counted per call). A trailer that does not parse is ignored, as C-core ignores it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf.message import DecodeError
from xds.data.orca.v3 import orca_load_report_pb2

__all__ = ["ORCA_TRAILER", "load_report_of", "named_metrics"]

#: The trailer a backend's per-call ORCA report comes in.
ORCA_TRAILER = "endpoint-load-metrics-bin"
_NO_METRICS: Mapping[str, float] = {}


def load_report_of(trailers: Iterable[tuple[str, Any]] | None) -> Any:
    """The ``OrcaLoadReport`` in ``trailers`` (None when there is none, or it does not
    parse)."""
    for key, value in trailers or ():
        if key == ORCA_TRAILER and isinstance(value, bytes):
            try:
                return orca_load_report_pb2.OrcaLoadReport.FromString(value)
            except DecodeError:
                return None
    return None


def named_metrics(report: Any) -> Mapping[str, float]:
    """What load reporting counts of ``report``: its ``named_metrics`` (none without a
    report)."""
    if report is None or not report.named_metrics:
        return _NO_METRICS
    return dict(report.named_metrics)
