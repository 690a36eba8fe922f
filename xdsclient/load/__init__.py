"""``xdsclient.load``: load testing xDS control planes with simulated clients.

A run starts many light, correct xDS clients (each on its own stream and, by default, its own
TCP connection), drives them through a scenario with optional faults, and measures what a
control-plane team needs: time to a complete configuration, push fan-out, ACK latency, NACKs,
errors and reconnects (docs/load-testing.md). It imports the client's public API and its
sans-I/O core only, and the client never imports it.
"""

from __future__ import annotations

from ._results import ClientResult, Histogram, MessageCounts, Progress, RunResult

__all__ = ["ClientResult", "Histogram", "MessageCounts", "Progress", "RunResult"]

for _cls in (ClientResult, Histogram, MessageCounts, Progress, RunResult):
    _cls.__module__ = __name__
