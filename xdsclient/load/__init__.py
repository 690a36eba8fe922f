"""``xdsclient.load``: load testing xDS control planes with simulated clients.

A run starts many light, correct xDS clients (each on its own stream and, by default, its own
TCP connection), drives them through a scenario with optional faults, and measures what a
control-plane team needs: time to a complete configuration, push fan-out, ACK latency, NACKs,
errors and reconnects (docs/load-testing.md). It imports the client's public API and its
sans-I/O core only, and the client never imports it.
"""

from __future__ import annotations

from ._report import table
from ._results import ClientResult, Histogram, MessageCounts, Progress, RunResult
from ._run import PROGRESS_INTERVAL, NotServedError, UnreachableError, run
from ._scenario import Faults, Push, Scenario, ScenarioError, load_scenario

__all__ = [
    "PROGRESS_INTERVAL",
    "ClientResult",
    "Faults",
    "Histogram",
    "MessageCounts",
    "NotServedError",
    "Progress",
    "Push",
    "RunResult",
    "Scenario",
    "ScenarioError",
    "UnreachableError",
    "load_scenario",
    "run",
    "table",
]

for _cls in (ClientResult, Faults, Histogram, MessageCounts, NotServedError, Progress, Push,
             RunResult, Scenario, ScenarioError, UnreachableError):  # fmt: skip
    _cls.__module__ = __name__
