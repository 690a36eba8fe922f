"""Live progress while a load run goes on: a rich table on a terminal, plain lines elsewhere,
nothing with ``--quiet``; and the timeline of snapshots the HTML report plots."""

from __future__ import annotations

import io
import os

from tests.cli.helpers import cli
from xdsclient.load import Progress, Scenario, run
from xdsclient.load._progress_view import ProgressView, Timeline, fan_out, progress_line


def snapshot(elapsed: float, *, done: bool = False, complete: int = 0) -> Progress:
    return Progress(elapsed=elapsed, started=10, connected=9, complete=complete, reconnects=1,
                    nacks=2, errors=3, latest_connect=0.0021, latest_first_config=0.0352,
                    done=done)  # fmt: skip


def test_plain_lines_come_at_most_every_interval_and_always_at_the_end():
    """Off a terminal, a line per ``interval`` seconds of run time, and the last snapshot's."""
    out = io.StringIO()
    view = ProgressView(10, stream=out, interval=2.0)
    assert view.mode == "plain"
    for elapsed in (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.5):
        view(snapshot(elapsed))
    view(snapshot(4.7, done=True, complete=10))
    view.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 4, lines  # 0.5, 2.5, 4.5 and the end
    assert lines[0].startswith("load running    0.5s: 10/10 started, 9 connected, 0 complete")
    assert "latest connect 2.1 ms, first config 35.2 ms, ack -," in lines[0]
    assert "2 NACKs, 3 errors, 1 reconnects" in lines[0]
    assert lines[-1].startswith("load done    4.7s: 10/10 started, 9 connected, 10 complete")


def test_quiet_shows_nothing():
    """``quiet`` writes nothing at all, whatever the stream."""
    out = io.StringIO()
    view = ProgressView(10, stream=out, quiet=True, live=True)
    view(snapshot(1.0))
    view(snapshot(2.0, done=True))
    view.close()
    assert view.mode == "quiet"
    assert out.getvalue() == ""


def test_a_terminal_gets_the_live_table():
    """On a real terminal (a pseudo-terminal here) the view is rich's live table, redrawn in
    place with each snapshot's numbers."""
    main, secondary = os.openpty()
    with open(secondary, "w", encoding="utf-8") as terminal:
        view = ProgressView(10, stream=terminal)
        assert view.mode == "live"
        view(snapshot(1.0))
        view(snapshot(2.0, done=True, complete=7))
        view.close()
    shown = _read_all(main)
    assert "\x1b[" in shown  # cursor movement and colour: drawn in place
    assert "xdsclient load: done, 2.0 s" in shown
    assert "10/10" in shown
    assert "35.2 ms" in shown


def _read_all(main: int) -> str:
    """Everything written to a closed pseudo-terminal: one read may return only part of it."""
    chunks = []
    try:
        while chunk := os.read(main, 65536):
            chunks.append(chunk)
    except OSError:  # EIO: the other side is closed and everything was read
        pass
    finally:
        os.close(main)
    return b"".join(chunks).decode()


def test_fan_out_hands_each_snapshot_to_every_callback_in_order():
    """One snapshot reaches the view, the timeline and anything else, in order."""
    seen: list[str] = []
    timeline = Timeline()
    call = fan_out([timeline, lambda p: seen.append(progress_line(p, 10))])
    first, last = snapshot(1.0), snapshot(2.0, done=True)
    call(first)
    call(last)
    assert timeline.snapshots == [first, last]
    assert len(seen) == 2


async def test_a_run_publishes_every_half_second_and_once_done(cp):
    """A real run's snapshots, as the timeline keeps them: time goes forward, the last is
    ``done``, and every client was seen complete."""
    timeline = Timeline()
    scenario = Scenario(server=cp.address, listener="l", clients=20, duration=1.2)
    result = await run(scenario, on_progress=timeline)
    elapsed = [p.elapsed for p in timeline.snapshots]
    assert elapsed == sorted(elapsed)
    assert len(elapsed) >= 2
    assert timeline.snapshots[-1].done
    assert not any(p.done for p in timeline.snapshots[:-1])
    assert max(p.complete for p in timeline.snapshots) == result.complete == 20


async def test_the_command_prints_plain_progress_off_a_terminal_and_none_when_quiet(cp):
    """``xdsclient load`` with stderr in a pipe writes plain progress lines there (stdout keeps
    the table alone); ``--quiet`` writes none."""
    args = ("load", "--server", cp.address, "--listener", "l", "--clients", "3", "--duration",
            "0.8")  # fmt: skip
    status, out, err = await cli(*args)
    assert status == 0
    assert "clients 3  connected 3  complete 3" in out
    assert "load running" not in out
    progress = [line for line in err.splitlines() if line.startswith("load ")]
    assert progress, err
    assert progress[-1].startswith("load done")
    status, out, err = await cli(*args, "--quiet")
    assert status == 0
    assert "clients 3  connected 3  complete 3" in out
    assert err == ""
