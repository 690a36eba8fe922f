"""The drive loop runs any sans-I/O stream protocol, not only discovery: a minimal load
reporting (LRS) client, defined here, runs through the same `StreamDriver` the client uses for
its discovery streams, over the fake transport and over grpc.aio against a tiny LRS server.

This is what "adding LRS needs no change to the discovery driver" means: the stream's method
and codecs come with its `StreamSpec`, its protocol object answers the driver's few calls, and
whatever else its life means is told to its `StreamEvents`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import pytest
from envoy.config.core.v3 import base_pb2
from envoy.service.load_stats.v3 import lrs_pb2, lrs_pb2_grpc
from google.protobuf import duration_pb2

from tests.helpers import idle
from xdsclient import Backoff, ClientOptions, ServerConfig, StreamSpec, TransportError
from xdsclient._shell._driver import StreamDriver
from xdsclient._transports._grpc import GrpcTransport
from xdsclient.testing import FakeClock, FakeTransport

METHOD = "/envoy.service.load_stats.v3.LoadReportingService/StreamLoadStats"
SPEC = StreamSpec.of_method(METHOD, response_deserializer=lrs_pb2.LoadStatsResponse.FromString)
NODE = base_pb2.Node(id="n")


class LoadReporting:
    """A minimal LRS client, sans-I/O: the node in the first request of each stream; once the
    server said which clusters and how often, a report of those clusters every interval."""

    has_interest = True

    def __init__(self) -> None:
        self.response_received = False
        self._connected = False
        self._node_sent = False
        self._clusters: tuple[str, ...] = ()
        self._interval = 0.0
        self._due: float | None = None
        #: each response as it came: the message and the bytes the driver handed on with it
        self.received: list[tuple[Any, bytes | None]] = []

    def connect(self, now: float) -> None:
        self._connected, self._node_sent, self.response_received = True, False, False

    def requests_to_send(self, now: float) -> list[Any]:
        if not self._connected:
            return []
        if not self._node_sent:
            self._node_sent = True
            return [lrs_pb2.LoadStatsRequest(node=NODE)]
        if self._due is None or now < self._due:
            return []
        self._due = now + self._interval
        report = lrs_pb2.LoadStatsRequest()
        for name in self._clusters:
            report.cluster_stats.add(cluster_name=name, total_dropped_requests=0)
        return [report]

    def receive(self, message: Any, now: float, raw: bytes | None = None) -> list[Any]:
        self.response_received = True
        self.received.append((message, raw))
        self._clusters = tuple(message.clusters)
        self._interval = message.load_reporting_interval.ToTimedelta().total_seconds()
        self._due = now + self._interval
        return [("report", self._clusters, self._interval)]

    def next_deadline(self) -> float | None:
        return self._due

    def expire(self, now: float) -> list[Any]:
        return []  # a report that is due goes out with the next requests_to_send

    def disconnect(self, now: float, error: TransportError | None, *, report: bool) -> list[Any]:
        self._connected, self._due = False, None
        return [("lost", report)] if error is not None else []


class Recorder:
    """The `StreamEvents` of the test: what the driver published and told."""

    def __init__(self) -> None:
        self.published: list[Any] = []
        self.failures: list[str] = []
        self.opened = 0
        self.responses = 0
        self.changed = asyncio.Event()

    def on_open(self, now: float) -> None:
        self.opened += 1

    def on_request(self, request: Any, now: float) -> None:
        pass

    def on_response(self, response: Any, now: float) -> None:
        self.responses += 1

    def on_applied(self, response: Any, now: float) -> None:
        pass

    def on_failure(self, error: TransportError, now: float) -> None:
        self.failures.append(str(error))

    def publish(self, events: list[Any], after: asyncio.Future[None] | None = None) -> None:
        if events:
            self.published.extend(events)
            self.changed.set()


def _driver(transport: Any, clock: FakeClock, events: Recorder) -> StreamDriver[LoadReporting]:
    return StreamDriver(
        protocol=LoadReporting(),
        transport=transport,
        spec=SPEC,
        server="lrs",
        clock=clock,
        events=events,
        backoff=Backoff(jitter=0.0),
    )


@asynccontextmanager
async def _running(driver: StreamDriver[Any]) -> AsyncIterator[None]:
    task = asyncio.create_task(driver.run())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_load_reporting_stream_runs_through_the_driver_over_the_fake_transport(
    fake: FakeTransport, clock: FakeClock
) -> None:
    """The LRS method is opened, the node goes first, the server's answer (as bytes, decoded by
    the spec's deserializer) reaches the protocol, a report follows each interval, and a stream
    that ends after a response is reopened at once without a failure."""
    events = Recorder()
    driver = _driver(fake(ServerConfig(uri="lrs:1"), ClientOptions()), clock, events)
    async with _running(driver):
        stream = await fake.stream()
        protocol = driver.protocol
        assert stream.spec.method == METHOD
        assert (await stream.request()).node.id == "n"
        answer = lrs_pb2.LoadStatsResponse(
            clusters=["c"], load_reporting_interval=duration_pb2.Duration(seconds=10)
        )
        stream.respond(answer.SerializeToString())
        await idle()
        assert events.published == [("report", ("c",), 10.0)]
        assert [raw for _, raw in protocol.received] == [None]  # a fake's read has no bytes
        clock.advance(9.9)
        await idle()
        assert stream.pending_requests() == []
        clock.advance(0.1)
        report = await stream.request()
        assert [s.cluster_name for s in report.cluster_stats] == ["c"]
        assert not report.HasField("node")
        stream.fail()
        again = await fake.stream()
        assert (await again.request()).node.id == "n"
        assert events.failures == []
        assert events.published[-1] == ("lost", False)


async def test_a_load_reporting_stream_refused_before_any_response_backs_off(
    fake: FakeTransport, clock: FakeClock
) -> None:
    """A refused LRS stream is a connectivity failure told to its events, retried on the
    driver's backoff schedule like any stream."""
    events = Recorder()
    fake.refuse("lrs down")
    driver = _driver(fake(ServerConfig(uri="lrs:1"), ClientOptions()), clock, events)
    async with _running(driver):
        await idle()
        assert (fake.open_attempts, events.failures) == (1, ["lrs down"])
        clock.advance(0.99)
        await idle()
        assert fake.open_attempts == 1
        clock.advance(0.01)
        await idle()
        assert fake.open_attempts == 2
        assert events.published == [("lost", True), ("lost", True)]


class _LoadReportingServer(lrs_pb2_grpc.LoadReportingServiceServicer):  # type: ignore[misc]
    """A tiny LRS server: asks for cluster "c" every 10 s on each stream; keeps every request."""

    def __init__(self) -> None:
        self.requests: asyncio.Queue[Any] = asyncio.Queue()

    async def StreamLoadStats(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        async for request in request_iterator:
            await self.requests.put(request)
            if request.HasField("node"):
                yield lrs_pb2.LoadStatsResponse(
                    clusters=["c"], load_reporting_interval=duration_pb2.Duration(seconds=10)
                )


@pytest.fixture
async def lrs_server() -> AsyncIterator[tuple[str, _LoadReportingServer]]:
    servicer = _LoadReportingServer()
    server = grpc.aio.server()
    lrs_pb2_grpc.add_LoadReportingServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        await server.stop(None)


async def test_a_load_reporting_stream_runs_through_the_driver_over_grpc(
    lrs_server: tuple[str, _LoadReportingServer], clock: FakeClock
) -> None:
    """Over grpc.aio the same protocol and driver call the LRS method with the spec's codecs:
    the server reads the node, answers, and reads a report once the interval has passed; the
    protocol receives each response with the bytes it was decoded from."""
    address, servicer = lrs_server
    events = Recorder()
    transport = GrpcTransport(ServerConfig(uri=address), ClientOptions())
    driver = _driver(transport, clock, events)
    try:
        async with _running(driver):
            first = await asyncio.wait_for(servicer.requests.get(), 5)
            assert first.node.id == "n"
            await asyncio.wait_for(events.changed.wait(), 5)
            assert events.published == [("report", ("c",), 10.0)]
            ((message, raw),) = driver.protocol.received
            assert raw is not None
            assert lrs_pb2.LoadStatsResponse.FromString(raw) == message
            clock.advance(10)
            report = await asyncio.wait_for(servicer.requests.get(), 5)
            assert [s.cluster_name for s in report.cluster_stats] == ["c"]
            assert events.failures == []
    finally:
        await transport.close()
