"""The arithmetic of a distributed run: each worker's share of the clients, and progress
snapshots across processes, as plain data and several workers' merged into one.

Why apart from the Locust processes: this is the arithmetic of a distributed run (what the
master tells the terminal, the Prometheus endpoint and the HTML report while workers run), and
it must be testable without gevent. The histograms travel whole (`Histogram.to_dict`), so the
merged snapshot's latency distributions are exact, not Locust's millisecond-rounded ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from ._results import Histogram, Progress

__all__ = ["merge_progress", "progress_from_dict", "progress_to_dict", "shares"]

_SUMMED = ("started", "connected", "complete", "reconnects", "nacks", "errors")
_LATEST = ("latest_connect", "latest_first_config", "latest_ack_latency",
           "latest_push_to_applied")  # fmt: skip


def progress_to_dict(progress: Progress) -> dict[str, Any]:
    """Plain JSON types: the fields, and each histogram's `Histogram.to_dict`."""
    data = attrs.asdict(progress, filter=lambda field, _: field.name != "histograms")
    if progress.histograms is not None:
        data["histograms"] = {name: h.to_dict() for name, h in progress.histograms.items()}
    return data


def progress_from_dict(data: dict[str, Any]) -> Progress:
    """The snapshot `progress_to_dict` described."""
    fields = {k: v for k, v in data.items() if k != "histograms"}
    histograms = data.get("histograms")
    if histograms is not None:
        fields["histograms"] = {name: Histogram.from_dict(h) for name, h in histograms.items()}
    return Progress(**fields)


def merge_progress(snapshots: Sequence[Progress], *, done: bool) -> Progress:
    """One snapshot of several processes' latest ones: counts add, the elapsed time is the
    longest, a latest latency is the first process's that has one, histograms merge."""
    fields: dict[str, Any] = {name: sum(getattr(p, name) for p in snapshots) for name in _SUMMED}
    fields["elapsed"] = max((p.elapsed for p in snapshots), default=0.0)
    for name in _LATEST:
        fields[name] = next((getattr(p, name) for p in snapshots
                             if getattr(p, name) is not None), None)  # fmt: skip
    histograms: dict[str, Histogram] = {}
    for snapshot in snapshots:
        for name, histogram in (snapshot.histograms or {}).items():
            histograms.setdefault(name, Histogram()).merge(histogram)
    return Progress(**fields, done=done, histograms=histograms or None)


def shares(clients: int, workers: int) -> list[tuple[int, int]]:
    """Each worker's (first client number, count): ``clients`` split as evenly as can be, the
    first workers taking one more when it does not divide."""
    base, extra = divmod(clients, workers)
    result, first = [], 0
    for number in range(workers):
        count = base + (1 if number < extra else 0)
        result.append((first, count))
        first += count
    return result
