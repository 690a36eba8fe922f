"""Chaos convergence, briefly, for every transport variant (bench/chaos.py runs it for minutes)."""

from __future__ import annotations

import collections

import pytest

from xdsclient.testing._chaos import _violations, run_chaos

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


SENT = [b"v0", b"v1", b"v2"]


def _check(got: list[tuple[int, bytes]], arrivals: dict[bytes, list[int]]) -> tuple[list[str], int]:
    arrived = collections.defaultdict(list, {("n", raw): steps for raw, steps in arrivals.items()})
    return _violations("n", got, SENT, arrived)


def test_updates_in_the_order_sent_are_no_violation() -> None:
    """Versions received in the order the server made them pass."""
    assert _check([(1, b"v0"), (3, b"v2")], {}) == ([], 0)


def test_going_back_with_no_response_to_explain_it_is_a_violation() -> None:
    """A watcher taken back to a version it passed, with no response carrying that version
    since, is the client's own doing (a replay) and fails the run."""
    found, back = _check([(1, b"v1"), (2, b"v2"), (5, b"v1"), (6, b"v2")], {b"v1": [0]})
    assert found == [
        "n: went back to a version no server sent again: [1, 2, 1]",
        "n: went back to a version no server sent again: [1, 2, 1, 2]",
    ]
    assert back == 0


def test_going_back_because_a_server_sent_it_is_allowed_and_counted() -> None:
    """A primary answering again with an older state than the fallback's (gRFC A71), as the
    chaos run saw it: the fallback's v2 arrives (3), then the primary's first response with v1
    (4), then both are delivered (5, 6); the primary's v2 follows (7, 8). Each step back is
    explained by a response that arrived after the one that moved the watcher on."""
    got = [(1, b"v1"), (5, b"v2"), (6, b"v1"), (8, b"v2")]
    assert _check(got, {b"v1": [0, 4], b"v2": [3, 7]}) == ([], 2)


def test_an_update_delivered_twice_in_a_row_or_never_sent_is_a_violation() -> None:
    """The same version twice in a row, or contents the server never made, fail the run."""
    found, _ = _check([(1, b"v1"), (3, b"v1"), (4, b"forged")], {b"v1": [0, 2]})
    assert found == [
        "n: the same update delivered twice in a row: 1",
        "n: received an update the server never sent",
    ]
