"""The client's log lines: one WARNING per NACK and per lost server (not per retry), DEBUG
summaries, stable logger names; on the in-memory transport with a fake clock."""

from __future__ import annotations

import logging

import pytest

from tests.builders import endpoints, invalid_endpoints
from tests.helpers import idle
from xdsclient import CallbackWatcher, TransportError, XdsClient
from xdsclient.resources import ENDPOINT
from xdsclient.testing import FakeClock, FakeTransport


def _lines(caplog: pytest.LogCaptureFixture, logger: str, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger and r.levelno == level]


async def test_a_nack_is_one_warning_naming_type_resource_version_and_reason(
    fake: FakeTransport, client: XdsClient, caplog: pytest.LogCaptureFixture, delta: bool
) -> None:
    bad = invalid_endpoints("b")
    client.add_watcher(ENDPOINT, "b", CallbackWatcher(lambda event: None))
    stream = await fake.stream()
    await stream.request()
    with caplog.at_level(logging.INFO, logger="xdsclient"):
        stream.send([bad], version="42")
        await idle()
    (line,) = _lines(caplog, "xdsclient.protocol", logging.WARNING)
    assert line.startswith("NACK to fake:1: envoy.config.endpoint.v3.ClusterLoadAssignment")
    assert "socket_address.address" in line
    assert "'b'" in line or " b" in line
    if not delta:  # Delta responses carry no version_info, only per-resource versions
        assert "version '42'" in line


async def test_the_same_nack_again_is_debug_and_after_an_ack_a_warning_again(
    fake: FakeTransport, client: XdsClient, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that sends the rejected version again (a REST-JSON source does at every poll)
    gets the same NACK each time, logged once as a WARNING, then DEBUG; once a version is
    accepted, a new rejection is a WARNING again."""
    client.add_watcher(ENDPOINT, "b", CallbackWatcher(lambda event: None))
    stream = await fake.stream()
    await stream.request()
    with caplog.at_level(logging.DEBUG, logger="xdsclient"):
        for version in ("42", "42", "42"):
            stream.send([invalid_endpoints("b")], version=version)
            await idle()
        assert len(_lines(caplog, "xdsclient.protocol", logging.WARNING)) == 1
        again = [line for line in _lines(caplog, "xdsclient.protocol", logging.DEBUG)
                 if line.startswith("NACK to")]  # fmt: skip
        assert len(again) == 2
        assert all("rejected again" in line for line in again)
        stream.send([endpoints("b")], version="43")
        await idle()
        stream.send([invalid_endpoints("b")], version="42")
        await idle()
    assert len(_lines(caplog, "xdsclient.protocol", logging.WARNING)) == 2


async def test_a_server_down_for_many_retries_is_one_warning_and_its_return_one_info(
    fake: FakeTransport, clock: FakeClock, client: XdsClient, caplog: pytest.LogCaptureFixture
) -> None:
    fake.refuse(TransportError("xDS server fake:1 unavailable"))
    with caplog.at_level(logging.DEBUG, logger="xdsclient"):
        client.add_watcher(ENDPOINT, "a", CallbackWatcher(lambda event: None))
        for _ in range(5):
            await idle()
            clock.advance(120)
        assert fake.open_attempts >= 5
        fake.accept()
        clock.advance(120)
        stream = await fake.stream()
        stream.send([endpoints("a")])
        await idle()
    assert _lines(caplog, "xdsclient.connectivity", logging.WARNING) == [
        "xDS server fake:1 lost: xDS server fake:1 unavailable"
    ]
    assert _lines(caplog, "xdsclient.connectivity", logging.INFO) == [
        "xDS server fake:1 answers again"
    ]
    retries = _lines(caplog, "xdsclient.transport", logging.DEBUG)
    assert len(retries) >= 5  # every failure, at DEBUG only
    assert not [
        r for r in caplog.records if r.levelno >= logging.WARNING and "xdsclient.t" in r.name
    ]


async def test_debug_summarises_each_request_and_response_in_one_line(
    fake: FakeTransport, client: XdsClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="xdsclient.protocol"):
        for i in range(8):
            client.add_watcher(ENDPOINT, f"e{i}", CallbackWatcher(lambda event: None))
        stream = await fake.stream()
        await stream.request()
        stream.send([endpoints("e0")], version="3")
        await idle()
    lines = _lines(caplog, "xdsclient.protocol", logging.DEBUG)
    assert any(
        line.startswith("-> fake:1 envoy.config.endpoint.v3.ClusterLoadAssignment request")
        and "... 3 more" in line
        for line in lines
    )
    assert any(line.startswith("<- fake:1") and "resources=1" in line for line in lines)
    assert any(" ACK " in line for line in lines)
