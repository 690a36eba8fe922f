"""The final table of a run, in plain text (what ``xdsclient load`` prints at the end).

Why plain text with fixed columns: it goes to a terminal, a CI log or a ticket, and must read
the same in each; the same numbers, with the buckets, are in ``--json FILE``.
"""

from __future__ import annotations

from ._results import RunResult

__all__ = ["table"]

_LABELS = {
    "connect": "connect (dial to ready)",
    "first_config": "first complete config",
    "fanout": "fan-out spread",
    "push_to_applied": "push to applied",
    "ack_latency": "ACK latency (client)",
}


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def table(result: RunResult) -> str:
    """The run as a text table: counts, latency percentiles (ms), messages per type."""
    lines = [
        f"clients {result.clients}  connected {result.connected}  complete {result.complete}  "
        f"in {result.duration:.2f} s ({result.processes} process"
        f"{'es' if result.processes != 1 else ''})",
        f"pushes {result.pushes}  NACKs sent {result.nacks}  reconnects {result.reconnects}  "
        f"errors {_errors(result.errors)}",
        "",
        f"{'latency (ms)':<24}{'count':>8}{'min':>10}{'p50':>10}{'p90':>10}{'p99':>10}{'max':>10}",
    ]
    for name, histogram in result.histograms().items():
        row = f"{_LABELS[name]:<24}{histogram.count:>8}"
        if histogram.count:
            values = (histogram.min, histogram.percentile(50), histogram.percentile(90),
                      histogram.percentile(99), histogram.max)  # fmt: skip
            row += "".join(f"{_ms(v):>10}" for v in values)
        else:
            row += f"{'-':>10}" * 5
        lines.append(row)
    lines += ["", f"{'messages':<24}{'received':>10}{'bytes':>12}{'sent':>10}{'bytes':>12}"
              f"{'NACKs':>8}"]  # fmt: skip
    for kind, counts in sorted(result.messages.items()):
        lines.append(f"{kind:<24}{counts.received:>10}{counts.received_bytes:>12}"
                     f"{counts.sent:>10}{counts.sent_bytes:>12}{counts.nacks:>8}")  # fmt: skip
    lines += ["", f"generator CPU {result.cpu_seconds:.2f} s ({result.cpu_share:.0%} of a core), "
              f"event loop late by up to {_ms(result.loop_lag_max)} ms"]  # fmt: skip
    if result.saturated:
        lines.append("WARNING: the generator saturated (CPU or event loop): its latencies "
                     "include its own delay; run fewer clients per process")  # fmt: skip
    return "\n".join(lines) + "\n"


def _errors(errors: dict[str, int]) -> str:
    if not errors:
        return "0"
    return ", ".join(f"{status} {count}" for status, count in sorted(errors.items()))
