"""The HTML report of a load run (``--html FILE``): one self-contained file with plots.

Why matplotlib, as inline SVG: the report must open anywhere with no network, so everything is
inlined. matplotlib is the best-kept plotting library in Python and writes SVG itself: two plots
are a few tens of kilobytes of markup, need no JavaScript (nothing to fail in the browser's
console) and stay sharp when zoomed or printed. plotly would inline its 4 MB script into every
report; a hand-written SVG writer would be ours to keep (axes, log scales, ticks, legends).
matplotlib is imported only when a report is written, through its object API (no ``pyplot``
global state, so it is safe beside a running event loop).

The report reads only a `RunResult` and the `Progress` snapshots of the run (`Timeline`): the
latency distributions are drawn from the full-precision histograms (their percentiles, so a
curve is exact to 0.1 %), and clients started, connected and complete over time from the
snapshots.
"""

from __future__ import annotations

import html
import io
import os
import re
from collections.abc import Sequence
from typing import Any

from .._errors import MissingExtraError
from ._results import Histogram, Progress, RunResult

__all__ = ["render_html", "write_html"]

#: what each histogram measures, for the report's tables and legends
LABELS = {
    "connect": "connect (dial to ready)",
    "first_config": "first complete configuration",
    "fanout": "fan-out spread of a version",
    "push_to_applied": "push to applied",
    "ack_latency": "ACK latency (in the client)",
}
#: the percentiles a latency curve is drawn through (dense at the tail, where it matters)
CURVE = (
    *range(90),
    *(90 + i / 10 for i in range(90)),
    *(99 + i / 100 for i in range(90)),
    *(99.9 + i / 1000 for i in range(101)),
)
#: the table's percentiles
COLUMNS = (50, 90, 99, 99.9)

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.7em; text-align: right; }
th:first-child, td:first-child, #overview td { text-align: left; }
thead th { background: #f2f2f2; }
.warning { background: #fff3cd; border: 1px solid #e0b000; padding: 0.6em 1em; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
figcaption { color: #555; font-size: 0.9em; }
.none { color: #777; font-style: italic; }
"""


def write_html(path: str | os.PathLike[str], result: RunResult,
               timeline: Sequence[Progress] = ()) -> None:  # fmt: skip
    """Write the report of ``result`` (and of the run's ``timeline`` of snapshots) to
    ``path`` as one self-contained HTML file."""
    text = render_html(result, timeline)
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)


def render_html(result: RunResult, timeline: Sequence[Progress] = ()) -> str:
    """The report as HTML text: the scenario, the counts, a latency table, the latency
    distributions and the clients over time (inline SVG), and the messages by type."""
    figures = _Figures()
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>xdsclient load report</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>xdsclient load report</h1>",
        _overview(result),
        "<h2>Latencies</h2>",
        _latency_table(result),
        _figure("plot-latency", figures.latency(result.histograms()),
                "Latency distributions: the share of values at or below each latency "
                "(log scale), from the full-precision histograms."),
        "<h2>Clients over time</h2>",
        _figure("plot-clients", figures.clients(timeline, result.clients),
                "Clients started, connected (a stream open) and complete (holding their whole "
                "configuration) as the run went on."),
        "<h2>Messages by type</h2>",
        _messages_table(result),
        "</body></html>",
    ]  # fmt: skip
    return "\n".join(parts) + "\n"


def _overview(result: RunResult) -> str:
    """The scenario and the run's counts, with a warning when the generator saturated."""
    scenario = result.scenario
    watched = scenario.get("listener") or ("envoy profile" if scenario.get("envoy") else
                                           ", ".join(":".join(r) for r in scenario.get(
                                               "resources", ())))  # fmt: skip
    rows = [
        ("server", scenario.get("server") or scenario.get("bootstrap") or "-"),
        ("watching", watched or "-"),
        ("variant", ("Delta" if scenario.get("delta") else "SotW")
         + (", ADS" if scenario.get("ads", True) else ", per type")),
        ("duration", f"{result.duration:.2f} s"),
        ("processes", str(result.processes)),
        ("clients started / connected / complete",
         f"{result.clients} / {result.connected} / {result.complete}"),
        ("pushes", str(result.pushes)),
        ("NACKs sent", str(result.nacks)),
        ("reconnects", str(result.reconnects)),
        ("stream errors", ", ".join(f"{k} {v}" for k, v in sorted(result.errors.items()))
         or "none"),
        ("generator CPU", f"{result.cpu_seconds:.2f} s (peak share {result.cpu_share:.0%}), "
         f"longest loop lag {result.loop_lag_max * 1000:.1f} ms"),
    ]  # fmt: skip
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    warning = ""
    if result.saturated:
        warning = ('<p class="warning" id="saturated">The load generator saturated (its CPU '
                   "or its event loop was the bottleneck): latencies include its own delay. "
                   "Use fewer clients per process, or more processes.</p>")  # fmt: skip
    return f'{warning}<table id="overview"><tbody>{body}</tbody></table>'


def _latency_table(result: RunResult) -> str:
    head = "".join(f"<th>p{p:g}</th>" for p in COLUMNS)
    rows = []
    for name, histogram in result.histograms().items():
        if histogram.count:
            cells = [histogram.min, *(histogram.percentile(p) for p in COLUMNS), histogram.max]
            values = "".join(f"<td>{_ms(v)}</td>" for v in cells)
        else:
            values = f'<td colspan="{len(COLUMNS) + 2}" class="none">none recorded</td>'
        rows.append(f"<tr><td>{_e(LABELS.get(name, name))}</td><td>{histogram.count}</td>"
                    f"{values}</tr>")  # fmt: skip
    return (f'<table id="latencies"><thead><tr><th>ms</th><th>count</th><th>min</th>{head}'
            f"<th>max</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")  # fmt: skip


def _messages_table(result: RunResult) -> str:
    if not result.messages:
        return '<p class="none">No messages recorded.</p>'
    rows = "".join(
        f"<tr><td>{_e(kind)}</td><td>{c.received}</td><td>{c.received_bytes}</td>"
        f"<td>{c.sent}</td><td>{c.sent_bytes}</td><td>{c.nacks}</td></tr>"
        for kind, c in sorted(result.messages.items())
    )
    return ('<table id="messages"><thead><tr><th>type</th><th>responses</th><th>bytes</th>'
            "<th>requests</th><th>bytes</th><th>NACKs</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")  # fmt: skip


def _figure(element_id: str, svg: str | None, caption: str) -> str:
    body = '<p class="none">Nothing recorded to plot.</p>' if svg is None else svg
    return f'<figure id="{element_id}">{body}<figcaption>{_e(caption)}</figcaption></figure>'


class _Figures:
    """The plots, as SVG markup to inline (matplotlib imported on first use)."""

    def __init__(self) -> None:
        try:
            from matplotlib.figure import Figure
        except ImportError:
            raise MissingExtraError(
                "the HTML report needs matplotlib: pip install 'xdsclient[load]'"
            ) from None
        self._figure = Figure

    def latency(self, histograms: dict[str, Histogram]) -> str | None:
        """Each non-empty histogram's distribution: latency (ms, log) against percentile."""
        shown = {name: h for name, h in histograms.items() if h.count}
        if not shown:
            return None
        figure = self._figure(figsize=(10, 4.5))
        axes = figure.add_subplot()
        for name, histogram in shown.items():
            xs = [max(histogram.percentile(p), 1e-9) * 1000 for p in CURVE]
            axes.step(xs, CURVE, where="post", label=f"{LABELS.get(name, name)} "
                      f"(n={histogram.count})")  # fmt: skip
        axes.set_xscale("log")
        axes.set_xlabel("latency (ms)")
        axes.set_ylabel("percentile")
        axes.set_ylim(0, 100.5)
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncols=3, fontsize="small",
                    frameon=False)  # fmt: skip
        return _svg(figure)

    def clients(self, timeline: Sequence[Progress], total: int) -> str | None:
        """Clients started, connected and complete against the run's elapsed time."""
        if not timeline:
            return None
        figure = self._figure(figsize=(10, 4))
        axes = figure.add_subplot()
        elapsed = [0.0, *(p.elapsed for p in timeline)]  # nothing had started at 0
        for field in ("started", "connected", "complete"):
            axes.plot(elapsed, [0, *(getattr(p, field) for p in timeline)], label=field,
                      drawstyle="steps-post")  # fmt: skip
        if total:
            axes.axhline(total, color="#999", linestyle=":", linewidth=1, label="clients")
        axes.set_xlabel("seconds since the run started")
        axes.set_ylabel("clients")
        axes.set_ylim(bottom=0)
        axes.grid(True, alpha=0.3)
        axes.legend(loc="lower right", fontsize="small")
        return _svg(figure)


_PROLOGUE = re.compile(r"^.*?(?=<svg)", re.DOTALL)


def _svg(figure: Any) -> str:
    """The figure as SVG markup to inline: text kept as text (small, selectable), no date
    (the same run writes the same report), the XML prologue dropped."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "xdsclient-load"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
    return _PROLOGUE.sub("", buffer.getvalue(), count=1)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def _e(text: object) -> str:
    return html.escape(str(text))
