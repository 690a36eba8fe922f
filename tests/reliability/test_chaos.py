"""Chaos convergence, briefly, for every transport variant (bench/chaos.py runs it for minutes)."""

from __future__ import annotations

import pytest

from xdsclient.testing._chaos import run_chaos

VARIANTS = [
    pytest.param(True, False, id="ads-sotw"),
    pytest.param(True, True, id="ads-delta"),
    pytest.param(False, False, id="xds-sotw"),
    pytest.param(False, True, id="xds-delta"),
]


@pytest.mark.parametrize(("ads", "delta"), VARIANTS)
async def test_the_client_converges_after_random_faults_and_saw_only_what_was_sent(
    ads: bool, delta: bool
) -> None:
    report = await run_chaos(seconds=5.0, seed=11, ads=ads, delta=delta)
    assert report.violations == ()
    assert report.convergence is not None, report
    assert sum(report.faults.values()) >= 10
    assert report.updates_received > 0


@pytest.mark.parametrize(("ads", "delta"), VARIANTS)
async def test_with_a_fallback_server_the_client_converges_and_saw_only_what_was_sent(
    ads: bool, delta: bool
) -> None:
    report = await run_chaos(seconds=2.5, seed=5, ads=ads, delta=delta, servers=2)
    assert report.violations == ()
    assert report.convergence is not None, report
    assert report.faults.get("primary down, new watch", 0) >= 1, report
    assert report.updates_received > 0
