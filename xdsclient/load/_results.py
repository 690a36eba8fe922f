"""What a load run measured: full-precision histograms, per-client and aggregated results, and
the progress snapshots published while it runs.

Why our own histograms: Locust rounds response times to milliseconds, and a push that reaches a
thousand clients within 3 ms is the interesting case. `Histogram` keeps log-linear buckets of
nanoseconds with 1/1024 relative precision (three significant digits, HdrHistogram's usual
setting), the exact count, sum, minimum and maximum, and merges exactly (bucket counts add),
so histograms from Locust workers or from several runs combine without loss. It round-trips
through `to_dict` / `from_dict` (plain JSON types) to cross a Locust message or a JSON file.

Every report (the final table, ``--json``, the HTML report, Prometheus, Locust's aggregation)
reads these values and nothing else; the runner fills them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

__all__ = ["ClientResult", "Histogram", "MessageCounts", "Progress", "RunResult"]

#: sub-bucket bits: values are kept to 1 part in 2**_BITS (0.1 %)
_BITS = 10
_SUB = 1 << _BITS
_NS = 1e9


def _index(ns: int) -> int:
    """The bucket of a non-negative number of nanoseconds: exact below 2**_BITS, then
    log-linear (each power of two split in 2**_BITS equal sub-buckets)."""
    if ns < _SUB:
        return ns
    shift = ns.bit_length() - _BITS - 1
    return ((shift + 1) << _BITS) | ((ns >> shift) - _SUB)


def _lower(index: int) -> int:
    """The smallest value (ns) of a bucket."""
    if index < _SUB:
        return index
    shift = (index >> _BITS) - 1
    return ((index & (_SUB - 1)) + _SUB) << shift


def _upper(index: int) -> int:
    """The largest value (ns) of a bucket."""
    return _lower(index + 1) - 1 if index >= _SUB else index


class Histogram:
    """Durations in seconds, with 0.1 % precision, exact count/sum/min/max, mergeable."""

    __slots__ = ("_buckets", "count", "max", "min", "sum")

    def __init__(self) -> None:
        self._buckets: dict[int, int] = {}
        #: how many values were recorded
        self.count = 0
        #: the sum of every value recorded (seconds)
        self.sum = 0.0
        #: the exact smallest and largest values (seconds); 0.0 while empty
        self.min = 0.0
        self.max = 0.0

    def record(self, seconds: float) -> None:
        """Add one value (seconds; a negative one, from clocks of two machines, counts as 0)."""
        seconds = max(seconds, 0.0)
        index = _index(int(seconds * _NS))
        buckets = self._buckets
        buckets[index] = buckets.get(index, 0) + 1
        if self.count == 0 or seconds < self.min:
            self.min = seconds
        if self.count == 0 or seconds > self.max:
            self.max = seconds
        self.count += 1
        self.sum += seconds

    def merge(self, other: Histogram) -> None:
        """Add every value of ``other`` to this one (exactly: bucket counts add)."""
        if other.count == 0:
            return
        buckets = self._buckets
        for index, count in other._buckets.items():
            buckets[index] = buckets.get(index, 0) + count
        self.min = other.min if self.count == 0 else min(self.min, other.min)
        self.max = other.max if self.count == 0 else max(self.max, other.max)
        self.count += other.count
        self.sum += other.sum

    @property
    def mean(self) -> float:
        """The exact mean (seconds); 0.0 while empty."""
        return self.sum / self.count if self.count else 0.0

    def percentile(self, p: float) -> float:
        """The value (seconds) at or below which ``p`` percent of the values lie, within 0.1 %:
        the upper end of its bucket, kept within the exact minimum and maximum. 0.0 while
        empty; ``p`` of 0 is the minimum, 100 the maximum."""
        if not 0 <= p <= 100:
            raise ValueError(f"percentile {p} is not between 0 and 100")
        if self.count == 0:
            return 0.0
        if p == 0:
            return self.min
        rank = max(1, -(-self.count * p // 100))  # ceil, at least the first value
        seen = 0
        for index in sorted(self._buckets):
            seen += self._buckets[index]
            if seen >= rank:
                return min(max(_upper(index) / _NS, self.min), self.max)
        return self.max

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types: the summary (seconds) and the buckets, to rebuild it exactly."""
        return {
            "count": self.count,
            "sum": self.sum,
            "min": self.min,
            "max": self.max,
            "mean": self.mean,
            "p50": self.percentile(50),
            "p90": self.percentile(90),
            "p99": self.percentile(99),
            "p999": self.percentile(99.9),
            "precision_bits": _BITS,
            "buckets": [[index, count] for index, count in sorted(self._buckets.items())],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Histogram:
        """The histogram `to_dict` described (the summary percentiles are recomputed)."""
        if data.get("precision_bits", _BITS) != _BITS:
            raise ValueError(f"histogram precision {data['precision_bits']} is not {_BITS}")
        histogram = cls()
        histogram._buckets = {int(index): int(count) for index, count in data["buckets"]}
        histogram.count = int(data["count"])
        histogram.sum = float(data["sum"])
        histogram.min = float(data["min"])
        histogram.max = float(data["max"])
        return histogram

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Histogram):
            return NotImplemented
        return (self._buckets, self.count, self.sum, self.min, self.max) == (
            other._buckets, other.count, other.sum, other.min, other.max)  # fmt: skip

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if not self.count:
            return "Histogram(empty)"
        return (f"Histogram(count={self.count}, p50={self.percentile(50):.6f}, "
                f"p99={self.percentile(99):.6f}, max={self.max:.6f})")  # fmt: skip


@attrs.define(kw_only=True)
class MessageCounts:
    """Messages and bytes of one resource type, both ways, and the NACKs among the requests."""

    received: int = 0  #: responses received
    received_bytes: int = 0  #: their serialized size
    sent: int = 0  #: requests sent (first requests, subscription changes, ACKs and NACKs)
    sent_bytes: int = 0
    nacks: int = 0  #: requests sent carrying an ``error_detail``

    def merge(self, other: MessageCounts) -> None:
        """Add ``other``'s counts to these."""
        self.received += other.received
        self.received_bytes += other.received_bytes
        self.sent += other.sent
        self.sent_bytes += other.sent_bytes
        self.nacks += other.nacks

    def to_dict(self) -> dict[str, int]:
        """Plain JSON types."""
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MessageCounts:
        """The counts `to_dict` described."""
        return cls(**{field: int(data[field]) for field in _COUNT_FIELDS})


_COUNT_FIELDS = ("received", "received_bytes", "sent", "sent_bytes", "nacks")


@attrs.define(kw_only=True)
class ClientResult:
    """What one simulated client saw. Times are seconds; None when it never happened."""

    index: int  #: the client's number in the run (``{i}`` of the node id template)
    node_id: str
    connect: float | None = None  #: its first dial until the channel was ready
    first_config: float | None = None  #: its start until its first complete configuration
    reconnects: int = 0  #: streams opened after the first
    nacks: int = 0
    errors: int = 0  #: streams that ended with an error status, or failed to open
    #: the run ended it (or churn did) before it had its complete configuration
    incomplete: bool = True

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types."""
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClientResult:
        """The client `to_dict` described."""
        return cls(**{field.name: data[field.name] for field in attrs.fields(cls)})


#: a run's plain numbers: summed when merged, except the floats handled by `RunResult.merge`
_SUMMED = ("clients", "connected", "complete", "pushes", "nacks", "reconnects", "processes")
_FLOATS = ("started", "duration", "cpu_seconds", "cpu_share", "loop_lag_max")
_SCALARS = (*_FLOATS, *_SUMMED, "saturated")

#: the histograms of a run, by name, in report order
HISTOGRAMS = ("connect", "first_config", "fanout", "push_to_applied", "ack_latency")


@attrs.define(kw_only=True, eq=False)
class RunResult:
    """Everything a run measured, aggregated over its clients (and, merged, over processes).

    Histograms (seconds): ``connect`` (dial to channel ready, per connection made);
    ``first_config`` (client start to its first complete configuration); ``fanout`` (per
    version of each resource, the first client to receive it to each other client that
    received it: the spread of one push over the fleet); ``push_to_applied`` (a push's time to
    each client applying a resource it changed; only when the push time is known);
    ``ack_latency`` (a response read to its ACK or NACK handed to gRPC, inside the client).
    """

    scenario: dict[str, Any] = attrs.Factory(dict)  #: the scenario, as plain data
    started: float = 0.0  #: wall-clock (``time.time()``) start of the run
    duration: float = 0.0  #: seconds the run lasted
    clients: int = 0  #: clients started (churn counts the ones that joined)
    connected: int = 0  #: clients that opened a stream at least once
    complete: int = 0  #: clients that had their complete configuration at least once
    connect: Histogram = attrs.Factory(Histogram)
    first_config: Histogram = attrs.Factory(Histogram)
    fanout: Histogram = attrs.Factory(Histogram)
    push_to_applied: Histogram = attrs.Factory(Histogram)
    ack_latency: Histogram = attrs.Factory(Histogram)
    pushes: int = 0  #: pushes made by the run's push hook
    nacks: int = 0  #: NACKs sent
    reconnects: int = 0  #: streams opened after each client's first
    errors: dict[str, int] = attrs.Factory(dict)  #: stream failures by gRPC status name
    messages: dict[str, MessageCounts] = attrs.Factory(dict)  #: by resource type short name
    cpu_seconds: float = 0.0  #: the generator's process CPU time over the run
    #: the generator's CPU share of the time it ran (1.0: one core busy) where it saturated
    cpu_share: float = 0.0
    #: the generator was the bottleneck: its event loop lagged or its CPU was all used
    saturated: bool = False
    loop_lag_max: float = 0.0  #: the longest the generator's event loop was late (seconds)
    processes: int = 1  #: processes merged into this result
    per_client: list[ClientResult] = attrs.Factory(list)

    def histograms(self) -> dict[str, Histogram]:
        """The histograms by name, in report order."""
        return {name: getattr(self, name) for name in HISTOGRAMS}

    def merge(self, other: RunResult) -> None:
        """Add another process's result (a Locust worker's) to this one: counts add,
        histograms merge, the run spans both, and saturation in either is saturation."""
        if not self.scenario:
            self.scenario = dict(other.scenario)
        if other.started and (not self.started or other.started < self.started):
            end = max(self.started + self.duration, other.started + other.duration)
            self.started = other.started
            self.duration = end - self.started
        else:
            self.duration = max(self.duration, other.started + other.duration - self.started)
        for name in _SUMMED:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.cpu_seconds += other.cpu_seconds
        self.cpu_share = max(self.cpu_share, other.cpu_share)
        self.loop_lag_max = max(self.loop_lag_max, other.loop_lag_max)
        self.saturated = self.saturated or other.saturated
        for name, histogram in other.histograms().items():
            getattr(self, name).merge(histogram)
        for status, count in other.errors.items():
            self.errors[status] = self.errors.get(status, 0) + count
        for kind, counts in other.messages.items():
            self.messages.setdefault(kind, MessageCounts()).merge(counts)
        self.per_client.extend(other.per_client)

    @classmethod
    def merged(cls, results: Iterable[RunResult]) -> RunResult:
        """One result of several processes' results."""
        total = cls(processes=0)
        for result in results:
            total.merge(result)
        return total

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types (what ``--json FILE`` writes)."""
        data: dict[str, Any] = {name: getattr(self, name) for name in _SCALARS}
        data["scenario"] = self.scenario
        data["errors"] = dict(sorted(self.errors.items()))
        data["messages"] = {k: v.to_dict() for k, v in sorted(self.messages.items())}
        data["histograms"] = {name: h.to_dict() for name, h in self.histograms().items()}
        data["per_client"] = [client.to_dict() for client in self.per_client]
        return data

    def to_json(self, *, indent: int | None = 2) -> str:
        """`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunResult:
        """The result `to_dict` described (a worker's, sent to the master)."""
        result = cls(
            scenario=dict(data["scenario"]),
            errors={str(k): int(v) for k, v in data["errors"].items()},
            messages={k: MessageCounts.from_dict(v) for k, v in data["messages"].items()},
            per_client=[ClientResult.from_dict(c) for c in data["per_client"]],
        )
        for name in HISTOGRAMS:
            setattr(result, name, Histogram.from_dict(data["histograms"][name]))
        for name in _FLOATS:
            setattr(result, name, float(data[name]))
        for name in _SUMMED:
            setattr(result, name, int(data[name]))
        result.saturated = bool(data["saturated"])
        return result


@attrs.frozen(kw_only=True)
class Progress:
    """A snapshot of a run in progress, published through ``run(..., on_progress=...)`` about
    every `PROGRESS_INTERVAL` seconds and once at the end. Latencies are the latest values
    recorded (seconds), None before the first."""

    elapsed: float  #: seconds since the run started
    started: int  #: clients started so far
    connected: int  #: clients with a stream open now
    complete: int  #: clients holding their complete configuration now
    reconnects: int
    nacks: int
    errors: int  #: stream failures so far
    latest_connect: float | None = None
    latest_first_config: float | None = None
    latest_ack_latency: float | None = None
    latest_push_to_applied: float | None = None
    done: bool = False  #: the last snapshot of the run
    #: the run's histograms so far, by name: its live objects (copy what you keep; read them
    #: only inside the callback, on the run's loop); None when the publisher has none
    histograms: Mapping[str, Histogram] | None = attrs.field(default=None, eq=False, repr=False)
