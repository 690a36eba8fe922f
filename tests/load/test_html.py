"""The HTML report (``--html FILE``): self-contained, with the latency distributions and the
clients over time as inline SVG, every number from the run's own result."""

from __future__ import annotations

import re

from tests.cli.helpers import cli, one_error_line
from xdsclient.load import Push, RunResult, Scenario, run
from xdsclient.load._html import render_html
from xdsclient.load._progress_view import Timeline

from .conftest import assignments


async def pushed_run(cp) -> tuple[RunResult, Timeline]:
    """A real run of 12 clients with one push of every assignment, and its timeline."""
    timeline = Timeline()
    scenario = Scenario(server=cp.address, listener="l", clients=12, duration=1.5,
                        push=Push(at=0.7))  # fmt: skip
    result = await run(scenario, on_progress=timeline, push=lambda: cp.set_all(assignments(9)))
    return result, timeline


def figure(page: str, element_id: str) -> str:
    match = re.search(rf'<figure id="{element_id}">(.*?)</figure>', page, re.DOTALL)
    assert match is not None, element_id
    return match.group(1)


async def test_the_report_plots_each_latency_and_the_clients_over_time(cp):
    """Both plots are inline SVG: one curve per recorded histogram (its label and count in
    the legend) and the started, connected and complete lines over the run."""
    result, timeline = await pushed_run(cp)
    assert result.push_to_applied.count > 0
    page = render_html(result, timeline.snapshots)
    latency = figure(page, "plot-latency")
    assert latency.startswith("<svg")
    for name, label in (("first_config", "first complete configuration"),
                        ("push_to_applied", "push to applied"),
                        ("ack_latency", "ACK latency (in the client)")):  # fmt: skip
        count = result.histograms()[name].count
        assert f"{label} (n={count})" in latency
    clients = figure(page, "plot-clients")
    assert clients.startswith("<svg")
    for line in ("started", "connected", "complete"):
        assert f">{line}<" in clients


async def test_the_tables_hold_the_results_numbers(cp):
    """The overview, the latency percentiles (ms, three decimals) and messages per type are
    the result's own values."""
    result, timeline = await pushed_run(cp)
    page = render_html(result, timeline.snapshots)
    assert f"<td>{result.clients} / {result.connected} / {result.complete}</td>" in page
    p99 = result.first_config.percentile(99) * 1000
    assert f"<td>{p99:.3f}</td>" in page
    for kind, counts in result.messages.items():
        assert f"<tr><td>{kind}</td><td>{counts.received}</td>" in page
    assert 'id="saturated"' not in page or result.saturated


def test_the_report_needs_nothing_from_the_network_and_escapes_what_it_shows():
    """No script, stylesheet, image or font is fetched (everything is inline), and names from
    the scenario are escaped; an empty run says there is nothing to plot."""
    result = RunResult(scenario={"server": "127.0.0.1:1", "listener": "<b>x</b>"})
    result.saturated = True
    page = render_html(result, [])
    assert "<script" not in page
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "@import" not in page
    assert "url(" not in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page
    assert page.count("Nothing recorded to plot.") == 2
    assert 'id="saturated"' in page


async def test_the_command_writes_the_report(cp, tmp_path):
    """``--html FILE`` writes the report after the run, beside the usual table."""
    path = tmp_path / "report.html"
    status, out, _ = await cli("load", "--server", cp.address, "--listener", "l", "--clients",
                               "4", "--duration", "0.8", "--quiet",
                               "--html", str(path))  # fmt: skip
    assert status == 0
    assert "clients 4  connected 4  complete 4" in out
    page = path.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert figure(page, "plot-latency").startswith("<svg")
    assert figure(page, "plot-clients").startswith("<svg")


async def test_an_unwritable_report_is_status_3_before_the_run(tmp_path):
    """``--html`` into a directory that does not exist: one line, status 3, and no run (the
    server here would be unreachable, status 4, had it started)."""
    path = tmp_path / "missing" / "report.html"
    status, _, err = await cli("load", "--server", "127.0.0.1:1", "--listener", "l",
                               "--html", str(path))  # fmt: skip
    assert status == 3
    assert f"--html {path}: cannot write in {path.parent}" in one_error_line(err)
