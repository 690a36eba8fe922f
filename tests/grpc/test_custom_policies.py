"""Custom load-balancing policies (gRFC A52) and ORCA per-call load reports (gRFC A51) over real
grpc.aio: a cluster is balanced by the first policy of its list the client supports, a list of
none is NACKed, the factory gets the policy's config, backends' ``endpoint-load-metrics-bin``
trailers reach the policy (and move weighted round robin's weights) and load reports, and a
policy that raises fails calls, not the channel."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import grpc
import pytest
from envoy.extensions.load_balancing_policies.client_side_weighted_round_robin.v3 import (
    client_side_weighted_round_robin_pb2 as wrr_pb2,
)
from envoy.extensions.load_balancing_policies.round_robin.v3 import round_robin_pb2
from google.protobuf import empty_pb2, struct_pb2, wrappers_pb2
from udpa.type.v1 import typed_struct_pb2 as udpa_typed_struct_pb2
from xds.data.orca.v3 import orca_load_report_pb2
from xds.service.orca.v3 import orca_pb2
from xds.type.v3 import typed_struct_pb2

from xdsclient import XdsClient
from xdsclient.grpc import CallEnd, XdsChannel, register_lb_policy
from xdsclient.grpc._core import _quiet
from xdsclient.lb import (
    ConnectivityState,
    EndpointKey,
    PickOutcome,
    PickRequest,
    PickResult,
    aggregate_state,
    key_of,
)
from xdsclient.resources import Endpoint, LocalityEndpoints
from xdsclient.testing import ControlPlane, builders

from .echo import EchoBackend, EchoStub, Text, _ser, until

OrcaLoadReport = orca_load_report_pb2.OrcaLoadReport
_READY = ConnectivityState.READY


class ZonePolicy:
    """Every call to the first READY endpoint of the zone its config names (``zone``, or a
    StringValue's ``value``); remembers how each call it picked ended."""

    def __init__(self, config: Any) -> None:
        self.zone = config["zone"] if isinstance(config, dict) else config.value
        self.localities: tuple[LocalityEndpoints, ...] = ()
        self.states: dict[EndpointKey, ConnectivityState] = {}
        self.ends: list[tuple[EndpointKey, CallEnd]] = []
        self.reports: list[tuple[EndpointKey, Any]] = []

    def _endpoints(self) -> list[Endpoint]:
        return [e for locality in self.localities for e in locality.endpoints]

    def update(self, localities: Sequence[LocalityEndpoints], now: float) -> None:
        self.localities = tuple(localities)

    def set_endpoint_state(self, key: EndpointKey, state: ConnectivityState, now: float) -> None:
        self.states[key] = state

    def state(self) -> ConnectivityState:
        return aggregate_state(
            self.states.get(key_of(e), ConnectivityState.IDLE) for e in self._endpoints()
        )

    def wanted_connections(self) -> tuple[Endpoint, ...]:
        return tuple(self._endpoints())

    def pick(self, request: PickRequest, rand: Any, now: float) -> PickResult:
        for locality in self.localities:
            if locality.locality.zone != self.zone:
                continue
            for endpoint in locality.endpoints:
                if self.states.get(key_of(endpoint)) is _READY:
                    return PickResult(outcome=PickOutcome.COMPLETE, endpoint=endpoint)
        return PickResult(outcome=PickOutcome.QUEUE)

    def call_ended(self, key: EndpointKey, end: CallEnd) -> None:
        self.ends.append((key, end))

    def load_report(self, key: EndpointKey, report: Any, now: float) -> None:
        self.reports.append((key, report))


class BoomPolicy(ZonePolicy):
    """READY, and every pick raises."""

    def state(self) -> ConnectivityState:
        return _READY

    def pick(self, request: PickRequest, rand: Any, now: float) -> PickResult:
        raise RuntimeError("boom")


class OrcaBackend(EchoBackend):
    """An echo backend whose every Say call ends with ``report`` in its ORCA trailer, and
    which serves ORCA's out-of-band ``StreamCoreMetrics``: ``report`` at the interval asked
    (at least 10 ms), counting the streams opened and open."""

    def __init__(self, name: str, report: Any, *, orca: bool = True) -> None:
        super().__init__(name)
        self.report = report
        #: whether the ORCA service is served (without it, its calls fail UNIMPLEMENTED)
        self.orca = orca
        #: every call the server received, by method (those it does not serve included)
        self.methods: collections.Counter[str] = collections.Counter()
        #: ORCA streams opened, and open now
        self.streams = 0
        self.active = 0
        #: the reporting interval each stream asked for, in seconds
        self.intervals: list[float] = []

    async def start(self) -> None:
        server = grpc.aio.server(interceptors=[_Counting(self.methods)])
        handlers = {
            "Say": grpc.unary_unary_rpc_method_handler(self._say, Text.FromString, _ser),
            "Count": grpc.unary_stream_rpc_method_handler(self._count, Text.FromString, _ser),
        }
        orca = {
            "StreamCoreMetrics": grpc.unary_stream_rpc_method_handler(
                self._stream_core_metrics, orca_pb2.OrcaLoadReportRequest.FromString, _ser
            )
        }
        generic = [grpc.method_handlers_generic_handler("echo.Echo", handlers)]
        if self.orca:
            generic.append(
                grpc.method_handlers_generic_handler("xds.service.orca.v3.OpenRcaService", orca)
            )
        server.add_generic_rpc_handlers(generic)
        await self._listen(server)

    async def _stream_core_metrics(self, request: Any, context: Any) -> AsyncIterator[Any]:
        self.streams += 1
        self.active += 1
        self.intervals.append(request.report_interval.ToTimedelta().total_seconds())
        interval = max(self.intervals[-1], 0.01)
        try:
            while True:
                yield self.report
                await asyncio.sleep(interval)
        finally:
            self.active -= 1

    async def _say(self, request: Any, context: Any) -> Any:
        context.set_trailing_metadata(
            (("endpoint-load-metrics-bin", self.report.SerializeToString()),)
        )
        return await super()._say(request, context)


class _Counting(grpc.aio.ServerInterceptor):
    """Counts every call a server receives, by method."""

    def __init__(self, methods: collections.Counter[str]) -> None:
        self.methods = methods

    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        self.methods[details.method] += 1
        return await continuation(details)


@pytest.fixture
def made() -> Iterator[list[ZonePolicy]]:
    """``test.ZonePolicy`` and ``test.BoomPolicy`` registered (and unregistered after); the
    policies built, in order."""
    built: list[ZonePolicy] = []

    def factory(kind: type[ZonePolicy]) -> Any:
        def make(config: Any) -> ZonePolicy:
            policy = kind(config)
            built.append(policy)
            return policy

        return make

    register_lb_policy("type.googleapis.com/test.ZonePolicy", factory(ZonePolicy))
    register_lb_policy("test.BoomPolicy", factory(BoomPolicy))
    try:
        yield built
    finally:
        register_lb_policy("test.ZonePolicy", None)
        register_lb_policy("test.BoomPolicy", None)


def typed_struct(type_name: str, udpa: bool = False, **fields: Any) -> Any:
    """A TypedStruct (xds.type.v3, or udpa.type.v1) naming ``type_name`` with ``fields``."""
    value = struct_pb2.Struct()
    value.update(fields)
    module = udpa_typed_struct_pb2 if udpa else typed_struct_pb2
    return module.TypedStruct(type_url=f"type.googleapis.com/{type_name}", value=value)


def policy_cluster(name: str, *configs: Any, lrs: bool = False) -> Any:
    """An EDS cluster whose ``load_balancing_policy`` lists ``configs`` in order."""
    cluster = builders.cluster(name)
    if lrs:
        cluster.lrs_server.self.SetInParent()
    for i, config in enumerate(configs):
        entry = cluster.load_balancing_policy.policies.add()
        entry.typed_extension_config.name = f"policy-{i}"
        entry.typed_extension_config.typed_config.Pack(config)
    return cluster


def zones(name: str, *backends: EchoBackend) -> Any:
    """The assignment of ``name``: each backend alone in zone ``z-<backend>``."""
    return builders.cluster_load_assignment(
        name,
        [
            builders.LocalitySpec(endpoints=[("127.0.0.1", b.port)], zone=f"z-{b.name}")
            for b in backends
        ],
    )


def resources(cluster: Any, *backends: EchoBackend) -> list[Any]:
    """Listener ``svc`` routing everything to ``cluster`` over ``backends``."""
    return [
        builders.api_listener("svc"),
        builders.route_configuration("svc-routes", cluster.name),
        cluster,
        zones(cluster.name, *backends),
    ]


@pytest.fixture
async def backends() -> AsyncIterator[list[OrcaBackend]]:
    """Backends ``a`` and ``b`` reporting ORCA loads (a lightly loaded, b ten times more)."""
    started = [
        OrcaBackend(
            "a",
            OrcaLoadReport(
                rps_fractional=100,
                application_utilization=0.1,
                cpu_utilization=0.5,
                named_metrics={"queue": 3.0},
            ),
        ),
        OrcaBackend(
            "b",
            OrcaLoadReport(rps_fractional=100, application_utilization=1.0, named_metrics={}),
        ),
    ]
    try:
        for backend in started:
            await backend.start()
        yield started
    finally:
        for backend in started:
            await backend.stop()


async def say(channel: XdsChannel, calls: int) -> collections.Counter[str]:
    """``calls`` Say calls; which backend answered each."""
    stub = EchoStub(channel)
    answered: collections.Counter[str] = collections.Counter()
    for _ in range(calls):
        reply = await stub.Say(Text(value="hi"), timeout=5)
        answered[reply.value.split(":")[0]] += 1
    return answered


async def test_the_first_supported_policy_of_the_list_balances_the_cluster(
    plane: ControlPlane, client: XdsClient, made: list[ZonePolicy], backends: list[OrcaBackend]
) -> None:
    """A list of an unregistered TypedStruct, an unregistered typed config, ``test.ZonePolicy``
    for zone z-b, then round robin: the zone policy balances, every call goes to b, and its
    factory got the TypedStruct's fields as a dict."""
    a, b = backends
    cluster = policy_cluster(
        "c",
        typed_struct("test.Unknown", zone="z-a"),
        empty_pb2.Empty(),
        typed_struct("test.ZonePolicy", zone="z-b", weights=[1, 2]),
        round_robin_pb2.RoundRobin(),
    )
    plane.set_all(resources(cluster, a, b))
    async with XdsChannel("xds:///svc", client=client) as channel:
        assert await say(channel, 10) == {"b": 10}
    assert made
    assert made[0].zone == "z-b"
    assert isinstance(made[0], ZonePolicy)


async def test_a_udpa_typed_struct_and_a_typed_config_reach_the_factory(
    plane: ControlPlane, client: XdsClient, made: list[ZonePolicy], backends: list[OrcaBackend]
) -> None:
    """A ``udpa.type.v1.TypedStruct`` gives its fields as a dict; a policy registered by its
    own message type (here ``google.protobuf.StringValue``) gets that message."""
    a, b = backends
    register_lb_policy("google.protobuf.StringValue", ZonePolicy)
    try:
        typed = policy_cluster("typed", wrappers_pb2.StringValue(value="z-a"))
        udpa = policy_cluster("udpa", typed_struct("test.ZonePolicy", udpa=True, zone="z-b"))
        routes = builders.route_configuration(
            "svc-routes", {"/echo.Echo/Say": "typed", "/echo.Echo/Count": "udpa"}
        )
        plane.set_all(
            [
                builders.api_listener("svc"),
                routes,
                typed,
                zones("typed", a, b),
                udpa,
                zones("udpa", a, b),
            ]
        )
        async with XdsChannel("xds:///svc", client=client) as channel:
            assert await say(channel, 3) == {"a": 3}
            streamed = [m.value async for m in EchoStub(channel).Count(Text(value="2"), timeout=5)]
            assert streamed == ["b:0", "b:1"]
        assert [p.zone for p in made] == ["z-b"]  # the udpa one; StringValue's is not recorded
    finally:
        register_lb_policy("google.protobuf.StringValue", None)


async def test_a_cluster_naming_only_unsupported_policies_is_nacked(
    plane: ControlPlane, client: XdsClient, backends: list[OrcaBackend]
) -> None:
    """Only an unregistered TypedStruct and an unregistered type: the cluster is NACKed and
    calls fail UNAVAILABLE naming it and why, as C-core fails them."""
    a, b = backends
    cluster = policy_cluster("c", typed_struct("test.Unknown"), empty_pb2.Empty())
    plane.set_all(resources(cluster, a, b))
    async with XdsChannel("xds:///svc", client=client) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await EchoStub(channel).Say(Text(value="hi"), timeout=5)
    assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
    details = failed.value.details() or ""
    assert details.startswith("CDS resource c: invalid resource: ")
    assert "load_balancing_policy" in details
    assert "no supported policy" in details
    assert details.endswith("(node ID:xds-channel)")


async def test_a_policy_registered_later_makes_the_next_version_valid(
    plane: ControlPlane, client: XdsClient, backends: list[OrcaBackend]
) -> None:
    """The registry is consulted when a cluster is decoded: the same cluster sent again after
    its policy is registered is accepted and balances the calls."""
    a, b = backends
    plane.set_all(resources(policy_cluster("c", typed_struct("test.Late", zone="z-a")), a, b))
    async with XdsChannel("xds:///svc", client=client) as channel:
        with pytest.raises(grpc.aio.AioRpcError):
            await EchoStub(channel).Say(Text(value="hi"), timeout=5)
        register_lb_policy("test.Late", ZonePolicy)
        try:
            plane.set(policy_cluster("c", typed_struct("test.Late", zone="z-a"), empty_pb2.Empty()))
            reply = await EchoStub(channel).Say(Text(value="hi"), timeout=5, wait_for_ready=True)
        finally:
            register_lb_policy("test.Late", None)
    assert reply.value == "a:hi"


async def test_the_policy_hears_each_call_end_and_grpcio_keeps_the_orca_trailer(
    plane: ControlPlane, client: XdsClient, made: list[ZonePolicy], backends: list[OrcaBackend]
) -> None:
    """Each call the zone policy picked on a reaches its ``call_ended`` hook: ok (or not) and
    its elapsed time. a sends an ``endpoint-load-metrics-bin`` trailer with every call, but
    grpcio's C-core consumes it and never publishes it to Python (the trailer's metadata trait
    is not published to the application), so no per-call report reaches the policy: this pins
    that fact (the day grpcio publishes it, the report arrives and this test says so)."""
    a, b = backends
    plane.set_all(resources(policy_cluster("c", typed_struct("test.ZonePolicy", zone="z-a")), a, b))
    async with XdsChannel("xds:///svc", client=client) as channel:
        assert await say(channel, 3) == {"a": 3}
        with pytest.raises(grpc.aio.AioRpcError):
            await EchoStub(channel).Say(Text(value="fail:INTERNAL"), timeout=5)
    ends = made[0].ends
    assert [key for key, _ in ends] == [("127.0.0.1", a.port)] * 4
    assert [end.ok for _, end in ends] == [True, True, True, False]
    assert all(end.elapsed > 0 for _, end in ends)
    assert [end.load_report for _, end in ends] == [None] * 4
    assert (a.streams, b.streams) == (0, 0)  # registered without an ORCA interval


async def test_a_raising_policy_fails_its_calls_with_a_clear_status_not_the_channel(
    plane: ControlPlane, client: XdsClient, made: list[ZonePolicy], backends: list[OrcaBackend]
) -> None:
    """``test.BoomPolicy`` raises in every pick: its calls fail UNAVAILABLE naming the policy,
    the cluster and the error; a route to a round-robin cluster on the same channel still
    answers."""
    a, b = backends
    boom = policy_cluster("boom", typed_struct("test.BoomPolicy", zone="z-a"))
    fine = policy_cluster("fine", round_robin_pb2.RoundRobin())
    routes = builders.route_configuration(
        "svc-routes", {"/echo.Echo/Say": "boom", "/echo.Echo/Count": "fine"}
    )
    plane.set_all(
        [builders.api_listener("svc"), routes, boom, zones("boom", a), fine, zones("fine", b)]
    )
    async with XdsChannel("xds:///svc", client=client) as channel:
        stub = EchoStub(channel)
        for _ in range(2):
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await stub.Say(Text(value="hi"), timeout=5)
            assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
            assert failed.value.details() == (
                "LB policy test.BoomPolicy of cluster boom failed to pick: RuntimeError: boom"
            )
        assert [m.value async for m in stub.Count(Text(value="1"), timeout=5)] == ["b:0"]


async def test_a_policy_whose_factory_raises_fails_its_calls(
    plane: ControlPlane, client: XdsClient, backends: list[OrcaBackend]
) -> None:
    """A factory that raises (a config without ``zone``): calls fail UNAVAILABLE saying the
    policy failed to build, and why."""
    a, _ = backends
    register_lb_policy("test.NoZone", ZonePolicy)
    try:
        plane.set_all(resources(policy_cluster("c", typed_struct("test.NoZone", other="x")), a))
        async with XdsChannel("xds:///svc", client=client) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await EchoStub(channel).Say(Text(value="hi"), timeout=5)
    finally:
        register_lb_policy("test.NoZone", None)
    assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
    assert failed.value.details() == (
        "LB policy test.NoZone of cluster c failed to build: KeyError: 'zone'"
    )


async def test_out_of_band_orca_reports_move_weighted_round_robin_weights(
    plane: ControlPlane, client: XdsClient, backends: list[OrcaBackend]
) -> None:
    """WRR with ``enable_oob_load_report`` (no blackout) over a (qps 100 at utilization 0.1:
    weight 1000) and b (weight 100): each backend gets one ``StreamCoreMetrics`` stream, and
    once its reports are in, a window of 100 calls gives a at least 5 times b's share (round
    robin, without them, gives 50/50)."""
    a, b = backends
    wrr = wrr_pb2.ClientSideWeightedRoundRobin()
    wrr.enable_oob_load_report.value = True
    wrr.oob_reporting_period.FromMilliseconds(50)
    wrr.blackout_period.FromMilliseconds(0)
    wrr.weight_update_period.FromMilliseconds(100)
    assignment = builders.cluster_load_assignment(
        "c", [("127.0.0.1", a.port), ("127.0.0.1", b.port)]
    )
    plane.set_all(
        [
            builders.api_listener("svc"),
            builders.route_configuration("svc-routes", "c"),
            policy_cluster("c", wrr),
            assignment,
        ]
    )
    windows = []
    async with XdsChannel("xds:///svc", client=client) as channel:
        for _ in range(30):
            window = await say(channel, 100)
            windows.append(dict(window))
            if window["a"] >= 5 * window.get("b", 0):
                break
    assert windows[-1]["a"] >= 5 * windows[-1].get("b", 0), windows
    assert (a.streams, b.streams) == (1, 1)


async def test_a_policy_registered_with_an_orca_interval_gets_out_of_band_reports(
    plane: ControlPlane, client: XdsClient, backends: list[OrcaBackend]
) -> None:
    """Registered with ``orca_interval``, the policy's every endpoint gets a
    ``StreamCoreMetrics`` stream once connected, and the policy's ``load_report`` hook gets
    each backend's reports (as sent); registered without one, no stream is opened (the
    call-end test checks that)."""
    a, b = backends
    built: list[ZonePolicy] = []

    def factory(config: Any) -> ZonePolicy:
        built.append(ZonePolicy(config))
        return built[-1]

    register_lb_policy("test.OrcaZone", factory, orca_interval=0.05)
    try:
        cluster = policy_cluster("c", typed_struct("test.OrcaZone", zone="z-a"))
        plane.set_all(resources(cluster, a, b))
        async with XdsChannel("xds:///svc", client=client) as channel:
            assert await say(channel, 2) == {"a": 2}
            wanted = [(("127.0.0.1", a.port), a.report), (("127.0.0.1", b.port), b.report)]
            await until(lambda: all(pair in built[0].reports for pair in wanted), 5)
        assert (a.streams, b.streams) == (1, 1)
    finally:
        register_lb_policy("test.OrcaZone", None)


async def test_orca_streams_end_when_no_cluster_asks_and_with_the_channel(
    plane: ControlPlane, client: XdsClient, backends: list[OrcaBackend]
) -> None:
    """A WRR cluster with out-of-band reports opens a stream to a; once the cluster turns to
    round robin the stream is cancelled (a sees it end) and calls go on; turned back, one new
    stream opens, and closing the channel ends it."""
    a, _ = backends
    wrr = wrr_pb2.ClientSideWeightedRoundRobin()
    wrr.enable_oob_load_report.value = True
    wrr.oob_reporting_period.FromMilliseconds(50)
    plane.set_all(resources(policy_cluster("c", wrr), a))
    async with XdsChannel("xds:///svc", client=client) as channel:
        assert await say(channel, 1) == {"a": 1}
        await until(lambda: a.active == 1, 5)
        plane.set(policy_cluster("c", round_robin_pb2.RoundRobin()))
        await until(lambda: a.active == 0, 5)
        assert await say(channel, 1) == {"a": 1}
        plane.set(policy_cluster("c", wrr))
        await until(lambda: a.active == 1, 5)
        assert a.streams == 2
    await until(lambda: a.active == 0, 5)


async def test_a_new_reporting_period_restarts_the_orca_stream_with_it(
    plane: ControlPlane, client: XdsClient, backends: list[OrcaBackend]
) -> None:
    """The cluster's ``oob_reporting_period`` changes from 50 ms to 200 ms: the stream asking
    for 50 ms ends and one asking for 200 ms takes its place (C-core asks again with the new
    interval); an unchanged period keeps its stream."""
    a, _ = backends
    wrr = wrr_pb2.ClientSideWeightedRoundRobin()
    wrr.enable_oob_load_report.value = True
    wrr.oob_reporting_period.FromMilliseconds(50)
    plane.set_all(resources(policy_cluster("c", wrr), a))
    async with XdsChannel("xds:///svc", client=client) as channel:
        assert await say(channel, 1) == {"a": 1}
        await until(lambda: a.active == 1, 5)
        wrr.oob_reporting_period.FromMilliseconds(200)
        plane.set(policy_cluster("c", wrr))
        await until(lambda: a.intervals == [0.05, 0.2] and a.active == 1, 5)
        wrr.weight_update_period.FromMilliseconds(500)  # another change, the same period
        plane.set(policy_cluster("c", wrr))
        await until(lambda: channel._core.snapshot is not None and _update_period(channel) == 0.5)
        assert await say(channel, 1) == {"a": 1}
        assert (a.intervals, a.active) == ([0.05, 0.2], 1)


def _update_period(channel: XdsChannel) -> float | None:
    snapshot = channel._core.snapshot
    assert snapshot is not None
    cluster = snapshot.clusters["c"].cluster
    assert cluster is not None
    policy: Any = cluster.lb_policy
    return getattr(getattr(policy, "child", policy), "weight_update_period", None)


async def test_an_orca_stream_the_backend_does_not_serve_is_not_retried_while_connected(
    plane: ControlPlane, client: XdsClient
) -> None:
    """Backends without the ORCA service: each gets one ``StreamCoreMetrics`` call (failing
    UNIMPLEMENTED), calls reach both, and a new snapshot (a route moved to
    another cluster, seen by where calls land) opens no new stream while they stay connected."""
    stream = "/xds.service.orca.v3.OpenRcaService/StreamCoreMetrics"
    a, b, c = (OrcaBackend(name, OrcaLoadReport(), orca=False) for name in "abc")
    wrr = wrr_pb2.ClientSideWeightedRoundRobin()
    wrr.enable_oob_load_report.value = True
    wrr.oob_reporting_period.FromMilliseconds(50)
    try:
        for backend in (a, b, c):
            await backend.start()
        assignment = builders.cluster_load_assignment(
            "c", [("127.0.0.1", a.port), ("127.0.0.1", b.port)]
        )
        routes = builders.route_configuration("svc-routes", "c")
        plane.set_all([builders.api_listener("svc"), routes, policy_cluster("c", wrr), assignment])
        async with XdsChannel("xds:///svc", client=client) as channel:
            assert set(await say(channel, 10)) == {"a", "b"}
            await until(lambda: a.methods[stream] == 1 and b.methods[stream] == 1, 5)
            moved = builders.route_configuration(
                "svc-routes", {"/echo.Echo/Say": "other", "/echo.Echo/Count": "c"}
            )
            plane.set_all(
                [
                    builders.api_listener("svc"),
                    moved,
                    policy_cluster("c", wrr),
                    assignment,
                    policy_cluster("other", round_robin_pb2.RoundRobin()),
                    builders.cluster_load_assignment("other", [("127.0.0.1", c.port)]),
                ]
            )
            reply = await EchoStub(channel).Say(Text(value="hi"), timeout=5, wait_for_ready=True)
            while reply.value != "c:hi":
                reply = await EchoStub(channel).Say(Text(value="hi"), timeout=5)
        assert (a.methods[stream], b.methods[stream], c.methods[stream]) == (1, 1, 0)
    finally:
        for backend in (a, b, c):
            await backend.stop()


async def test_only_clusters_whose_orca_reports_nobody_reads_leave_the_trailers_unread(
    plane: ControlPlane, client: XdsClient, made: list[ZonePolicy]
) -> None:
    """Round robin, ring hash and least request clusters are quiet (their unary calls' trailers
    go unread); weighted round robin, a custom policy and any cluster with ``lrs_server``,
    which read the ORCA report in them, are not."""
    lrs = builders.cluster("lrs")
    lrs.lrs_server.self.SetInParent()
    clusters = [
        builders.cluster("rr"),
        builders.cluster("rh", lb_policy="ring_hash"),
        builders.cluster("lr", lb_policy="least_request"),
        lrs,
        policy_cluster("wrr", wrr_pb2.ClientSideWeightedRoundRobin()),
        policy_cluster("custom", typed_struct("test.ZonePolicy", zone="z-a")),
    ]
    served = []
    for cluster in clusters:
        served += [
            builders.api_listener(cluster.name),
            builders.route_configuration(f"{cluster.name}-routes", cluster.name),
            cluster,
            builders.cluster_load_assignment(cluster.name, [("127.0.0.1", 1)]),
        ]
    plane.set_all(served)
    quiet: set[str] = set()
    for cluster in clusters:
        quiet |= _quiet(await client.wait_for_config(cluster.name, timeout=10))
    assert quiet == {"rr", "rh", "lr"}
