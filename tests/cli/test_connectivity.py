"""The cause ``dump`` and ``watch`` name when nothing arrived: the last failure of a server that
is still lost, from the client's connectivity events."""

from __future__ import annotations

import logging

import pytest

from xdsclient import ConnectivityChanged, ResponseReceived, XdsClient
from xdsclient._cli._connectivity import Connectivity, held_back


def _lost(server: str, error: str | None) -> ConnectivityChanged:
    return ConnectivityChanged(server=server, time=1.0, connected=False, error=error)


def test_no_failure_is_no_cause() -> None:
    connectivity = Connectivity()
    connectivity(ConnectivityChanged(server="a:1", time=1.0, connected=True))
    assert connectivity.cause() is None


def test_a_server_that_answers_again_is_no_longer_the_cause() -> None:
    connectivity = Connectivity()
    connectivity(_lost("a:1", "xDS stream to a:1 failed: UNAVAILABLE"))
    assert connectivity.cause() == "xDS stream to a:1 failed: UNAVAILABLE"
    connectivity(ConnectivityChanged(server="a:1", time=2.0, connected=True))
    assert connectivity.cause() is None


def test_the_latest_failure_of_a_server_still_lost_is_named_with_its_server() -> None:
    connectivity = Connectivity()
    connectivity(_lost("a:1", "xDS stream to a:1 failed: UNAVAILABLE"))
    connectivity(_lost("b:2", "HTTP 503"))
    connectivity(_lost("a:1", "xDS stream to a:1 failed: INTERNAL"))
    assert connectivity.cause() == "xDS stream to a:1 failed: INTERNAL"
    connectivity(ConnectivityChanged(server="a:1", time=3.0, connected=True))
    assert connectivity.cause() == "b:2: HTTP 503"
    connectivity(_lost("c:3", None))
    assert connectivity.cause() == "c:3: no response"


def test_other_events_change_nothing() -> None:
    connectivity = Connectivity()
    connectivity(ResponseReceived(server="a:1", time=1.0, type_url="t", delta=False,
                                  version_info="1", nonce="n", resource_count=0))  # fmt: skip
    assert connectivity.cause() is None


def test_connectivity_lines_are_held_back_only_while_the_command_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Held back while the block runs (the command's last line names the cause), written again
    after it; the observer is removed with it."""
    logger = logging.getLogger("xdsclient.connectivity")
    client = XdsClient("127.0.0.1:1", node_id="n")
    before = client._observers._all
    with caplog.at_level(logging.INFO), held_back(client) as connectivity:
        logger.warning("xDS server a:1 lost: refused")
        assert client._observers._all == (*before, connectivity)
    assert client._observers._all == before
    logger.warning("xDS server a:1 lost: refused again")
    assert [r.getMessage() for r in caplog.records] == ["xDS server a:1 lost: refused again"]
