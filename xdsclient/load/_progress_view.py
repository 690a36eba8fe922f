"""Live progress of a load run on the terminal, and the timeline the HTML report plots.

Why three modes: a person at a terminal wants one table that updates in place (``rich``'s live
display); a log (CI, a file, a pipe) wants a plain line every few seconds that reads well
after the fact, never cursor movements; ``--quiet`` wants nothing. The mode is chosen once,
from whether the stream is a terminal, so the same command behaves well in both places.

Everything here is a callback for ``run(..., on_progress=...)``: it is called synchronously
on the run's loop with each `Progress` snapshot and must return quickly, so it only formats
and writes. `fan_out` hands one snapshot to several such callbacks (the view, the timeline,
the Prometheus endpoint).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import IO, Any

from .._errors import MissingExtraError
from ._results import Progress

__all__ = ["ProgressCallback", "ProgressView", "Timeline", "fan_out", "progress_line"]

#: what ``run(..., on_progress=...)`` calls with each snapshot
ProgressCallback = Callable[[Progress], None]

#: seconds of run time between two plain progress lines (the last snapshot always prints)
PLAIN_INTERVAL = 5.0


def _ms(seconds: float | None) -> str:
    """A latency for people: ``-`` before the first value, else milliseconds."""
    if seconds is None:
        return "-"
    return f"{seconds * 1000:.1f} ms"


def progress_line(progress: Progress, total: int) -> str:
    """One plain line describing a snapshot of a run of ``total`` clients."""
    state = "done" if progress.done else "running"
    return (
        f"load {state} {progress.elapsed:6.1f}s: {progress.started}/{total} started, "
        f"{progress.connected} connected, {progress.complete} complete; latest connect "
        f"{_ms(progress.latest_connect)}, first config {_ms(progress.latest_first_config)}, "
        f"ack {_ms(progress.latest_ack_latency)}, push to applied "
        f"{_ms(progress.latest_push_to_applied)}; {progress.nacks} NACKs, {progress.errors} "
        f"errors, {progress.reconnects} reconnects"
    )


class ProgressView:
    """Shows a run's progress on ``stream``: a live ``rich`` table on a terminal, a plain line
    every `PLAIN_INTERVAL` seconds of run time otherwise, nothing when ``quiet``.

    Call it with each `Progress`; call `close` when the run ends (also safe without a final
    snapshot, e.g. after an error), which leaves the last table or line in place.
    """

    def __init__(
        self,
        total: int,
        *,
        stream: IO[str] | None = None,
        quiet: bool = False,
        live: bool | None = None,
        interval: float = PLAIN_INTERVAL,
    ) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        #: "live" (rich on a terminal), "plain" (lines) or "quiet"
        self.mode = "quiet" if quiet else _mode(self.stream, live)
        self._next_line = 0.0
        self._live: Any = None
        if self.mode == "live":
            self._live = _start_live(self.stream)

    def __call__(self, progress: Progress) -> None:
        if self.mode == "live":
            self._live.update(_table(progress, self.total), refresh=True)
        elif self.mode == "plain" and (progress.done or progress.elapsed >= self._next_line):
            self._next_line = progress.elapsed + self.interval
            print(progress_line(progress, self.total), file=self.stream, flush=True)

    def close(self) -> None:
        """Stop updating (the live display leaves its last table on the terminal)."""
        if self._live is not None:
            self._live.stop()
            self._live = None


def _mode(stream: IO[str], live: bool | None) -> str:
    if live is None:
        isatty = getattr(stream, "isatty", None)
        live = bool(isatty and isatty())
    return "live" if live else "plain"


def _start_live(stream: IO[str]) -> Any:
    """A started ``rich`` live display on ``stream`` (a clear error when rich is missing)."""
    try:
        from rich.console import Console
        from rich.live import Live
    except ImportError:
        raise MissingExtraError(
            "live progress needs rich: pip install 'xdsclient[load]' (or use --quiet)"
        ) from None
    console = Console(file=stream, force_terminal=True)
    live = Live(console=console, auto_refresh=False, transient=False)
    live.start()
    return live


def _table(progress: Progress, total: int) -> Any:
    """The live display's table for one snapshot."""
    from rich.table import Table

    state = "done" if progress.done else "running"
    table = Table(title=f"xdsclient load: {state}, {progress.elapsed:.1f} s", title_justify="left")
    table.add_column("clients")
    table.add_column("", justify="right")
    table.add_column("latest")
    table.add_column("", justify="right")
    rows = (
        ("started", f"{progress.started}/{total}", "connect", _ms(progress.latest_connect)),
        ("connected", str(progress.connected), "first config",
         _ms(progress.latest_first_config)),
        ("complete", str(progress.complete), "ACK", _ms(progress.latest_ack_latency)),
        ("reconnects", str(progress.reconnects), "push to applied",
         _ms(progress.latest_push_to_applied)),
        ("NACKs / errors", f"{progress.nacks} / {progress.errors}", "", ""),
    )  # fmt: skip
    for row in rows:
        table.add_row(*row)
    return table


class Timeline:
    """Every snapshot of a run, in order: what the HTML report plots over time."""

    def __init__(self) -> None:
        self.snapshots: list[Progress] = []

    def __call__(self, progress: Progress) -> None:
        self.snapshots.append(progress)


def fan_out(callbacks: Sequence[ProgressCallback]) -> ProgressCallback:
    """One progress callback that calls each of ``callbacks`` in turn."""
    chain = tuple(callbacks)

    def call(progress: Progress) -> None:
        for callback in chain:
            callback(progress)

    return call
