"""`XdsChannel` under chaos, briefly (bench/chaos_channel.py runs it for a minute)."""

from __future__ import annotations

from xdsclient.testing._chaos_channel import FAULTS, run_channel_chaos


async def test_no_call_fails_while_the_control_plane_fails_nacks_and_falls_back() -> None:
    """Calls every 10 ms while the primary server is killed, restarted, cut off and stalled,
    a cluster is NACKed, the client falls back to the second server and endpoints come and go:
    every call succeeds, and so do the calls of channels opened during the fallback."""
    report = await run_channel_chaos(seconds=3.0, seed=7)
    assert report.failures == ()
    assert {row.fault for row in report.rows if row.times} == set(FAULTS), report.rows
    assert report.fallback_calls > 0
    assert report.fallback_failed == 0
    assert report.calls > 100
    assert report.backends_used > 1
