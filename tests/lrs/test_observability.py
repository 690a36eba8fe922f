"""A failing load reporting stream is seen as a failing discovery stream is: an observer event
per change of state, the stats' ``lrs_state`` and ``lrs_stream_failures``, the
``xdsclient.lrs`` metrics, and one WARNING per change (not per retry) naming LRS and the server.
A server without the LRS service (UNIMPLEMENTED) and a stream the server ends, over real
grpc.aio on loopback; a refused connection and a server that never answers on the fake
transport, where the fake clock and a drained loop say what did not happen."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tests.helpers import described, eventually, idle
from tests.lrs.test_reporting import _answer
from tests.shell.conftest import OPTIONS
from tests.shell.test_metrics import _points
from xdsclient import Locality, XdsClient
from xdsclient._observe._events import LoadReportingChanged, ProtocolEvent
from xdsclient.resources import ClusterView
from xdsclient.testing import ControlPlane, FakeClock, FakeTransport
from xdsclient.testing.builders import cluster

EAST = Locality(region="r", zone="east")


def _view() -> ClusterView:
    message = cluster("c")
    message.lrs_server.self.SetInParent()
    return ClusterView.from_proto(message)


class _Counting(grpc.GenericRpcHandler):
    """Serves nothing (gRPC answers every call UNIMPLEMENTED) and counts the calls."""

    def __init__(self) -> None:
        self.calls = 0

    def service(self, handler_call_details: Any) -> None:
        self.calls += 1


@pytest.fixture
async def no_lrs() -> AsyncIterator[tuple[str, _Counting]]:
    """A gRPC server with no service at all: every method is UNIMPLEMENTED (and counted)."""
    counting = _Counting()
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([counting])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}", counting
    await server.stop(None)


async def _until(condition: Callable[[], bool], clock: FakeClock | None = None) -> None:
    def held() -> bool:
        try:
            if condition():
                return True
        except KeyError:  # the server is not in the client's stats yet
            pass
        if clock is not None:
            clock.advance(1)  # a retry that is due goes out
        return False

    await eventually(held, 10, what=described(condition))


def _lrs_events(client: XdsClient) -> list[LoadReportingChanged]:
    seen: list[LoadReportingChanged] = []

    def observe(event: ProtocolEvent) -> None:
        if isinstance(event, LoadReportingChanged):
            seen.append(event)

    client.add_observer(observe, verdicts=False)
    return seen


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_an_lrs_server_without_the_service_is_failing_in_stats_events_and_one_warning(
    no_lrs: tuple[str, _Counting], caplog: pytest.LogCaptureFixture
) -> None:
    """UNIMPLEMENTED: the LRS state goes connecting then failing (with the reason), the stats
    count one failure, and one WARNING names LRS and the server, however many retries."""
    address, server = no_lrs
    clock = FakeClock()
    async with XdsClient(address, node_id="n", clock=clock, options=OPTIONS) as client:
        events = _lrs_events(client)
        client.load_reporter(_view()).call_started(EAST)
        await _until(lambda: client.stats().servers[address].lrs_state == "failing")
        attempts = server.calls
        # three more attempts, each UNIMPLEMENTED again: the fourth reaching the server means
        # the client has taken in the failures of the three before it
        await _until(lambda: server.calls >= attempts + 4, clock)
        stats = client.stats().servers[address]
        assert (stats.lrs_state, stats.lrs_stream_failures) == ("failing", 1)
        assert [e.state for e in events] == ["connecting", "failing"]
        assert events[1].error is not None
        assert events[1].error.startswith("UNIMPLEMENTED")
    (warning,) = [w for w in _warnings(caplog) if "LRS" in w]
    assert warning.startswith(f"LRS stream to {address} failing: UNIMPLEMENTED")
    assert not any("xDS server" in w for w in _warnings(caplog))  # not a discovery failure


async def test_a_refused_lrs_server_counts_one_failure_in_stats_and_metrics_until_it_answers(
    fake: FakeTransport, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Connection refused, retried on the fake clock: one failure in the stats and in the
    ``xdsclient.lrs.stream_failure`` metric, the ``reporting`` gauge 0, one WARNING, however
    many retries; once the server accepts and answers, the state is reporting and the gauge 1."""
    caplog.set_level(logging.INFO, logger="xdsclient.lrs")
    reader = InMemoryMetricReader()
    fake.refuse("connection refused")
    async with XdsClient(
        "fake:1", node_id="n", transport=fake, clock=clock, options=OPTIONS
    ) as client:
        client.enable_metrics(MeterProvider(metric_readers=[reader]), target="t")
        client.load_reporter(_view()).call_started(EAST)
        await idle()
        assert client.stats().servers["fake:1"].lrs_state == "failing"
        for attempts in (2, 3, 4):  # three more attempts, each refused again
            clock.advance(120)
            await idle()
            assert fake.open_attempts == attempts
        assert client.stats().servers["fake:1"].lrs_stream_failures == 1
        labels = {"grpc.target": "t", "grpc.xds.server": "fake:1"}
        points = _points(reader)
        assert points["xdsclient.lrs.stream_failure"] == [(1, labels)]
        assert points["xdsclient.lrs.reporting"] == [(0, labels)]
        assert len([w for w in _warnings(caplog) if w.startswith("LRS stream to")]) == 1
        fake.accept()
        clock.advance(120)
        stream = await fake.stream()
        await stream.request()
        stream.respond(_answer(send_all=True, every=1))
        await idle()
        assert client.stats().servers["fake:1"].lrs_state == "reporting"
        assert _points(reader)["xdsclient.lrs.reporting"] == [(1, labels)]
    assert "LRS stream to fake:1 reporting again" in caplog.messages


async def test_an_lrs_server_that_never_answers_stays_connecting_without_a_failure(
    fake: FakeTransport, clock: FakeClock
) -> None:
    """A server that takes the stream and never answers: however long the clock runs, the
    state says connecting (no report can go out), no failure is counted and no other stream
    is opened."""
    async with XdsClient(
        "fake:1", node_id="n", transport=fake, clock=clock, options=OPTIONS
    ) as client:
        client.load_reporter(_view()).call_started(EAST)
        stream = await fake.stream()
        await stream.request()  # read, never answered
        for _ in range(5):
            clock.advance(60)
            await idle()
        assert fake.open_attempts == 1
        stats = client.stats().servers["fake:1"]
        assert (stats.lrs_state, stats.lrs_stream_failures) == ("connecting", 0)


async def test_an_lrs_stream_ended_by_its_server_is_logged_as_lrs_not_as_discovery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An LRS stream that had an answer and is ended by the server: one INFO line naming LRS
    and the server; no line reads as a discovery stream's; the stream comes back."""
    caplog.set_level(logging.INFO)
    clock = FakeClock()
    async with (
        ControlPlane() as cp,
        XdsClient(cp.address, node_id="n", clock=clock, options=OPTIONS) as client,
    ):
        client.load_reporter(_view()).call_started(EAST)
        await asyncio.wait_for(cp.load_reporting.wait_for_stream(1), 5)
        await _until(lambda: client.stats().servers[cp.address].lrs_state == "reporting")
        cp.load_reporting.end_streams()
        await asyncio.wait_for(cp.load_reporting.wait_for_stream(2), 5)
        ended = [r for r in caplog.records if "ended" in r.getMessage()]
        assert [(r.levelno, r.getMessage()) for r in ended] == [
            (
                logging.INFO,
                f"LRS stream to {cp.address} ended: UNAVAILABLE: LRS stream ended by the test",
            )
        ]
        assert not any("xDS stream" in m or "xDS server" in m for m in caplog.messages)
        assert client.stats().servers[cp.address].lrs_stream_failures == 0
