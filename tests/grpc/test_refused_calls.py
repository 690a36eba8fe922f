"""A call gRPC refuses to send (metadata C-core rejects, here an upper-case key) is no
endpoint's failure: C-core checks a batch's metadata before the call is picked, so the refused
call counts toward neither outlier detection nor the load report (issued, errored, in
progress). Checked on the direct path, with the guard on grpc.aio's private parts forced off
(`unary_path`), and on the driver's path (an interceptor's call)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from tests.helpers import eventually
from xdsclient import XdsClient
from xdsclient.grpc import XdsChannel, _direct
from xdsclient.testing import ControlPlane, builders

from ..lrs.test_end_to_end import _totals
from .echo import SAY, EchoStub, Text, cluster_of, echo_backends

_REFUSED = [("X-Upper", "1")]  # C-core refuses an upper-case key


class _Passing(grpc.aio.UnaryUnaryClientInterceptor):
    """Passes every call on unchanged: the channel's calls are driven `XdsCall`s."""

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], client_call_details: Any, request: Any
    ) -> Any:
        return await continuation(client_call_details, request)


@pytest.fixture(params=["direct", "fallback", "driven"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The unary call's path: direct, the guard forced off, or driven (an interceptor's)."""
    if request.param == "fallback":
        monkeypatch.setattr(_direct, "USABLE", False)
    return str(request.param)


def _channel(client: XdsClient, path: str) -> XdsChannel:
    interceptors = [_Passing()] if path == "driven" else []
    return XdsChannel("xds:///svc", client=client, interceptors=interceptors)


def _ejecting_cluster(backend: Any) -> list[Any]:
    """Cluster ``c`` on ``backend``, ejected by a sweep that sees 2 calls, over 1% failed."""
    served = cluster_of("c", [backend])
    detection = served[0].outlier_detection
    detection.enforcing_success_rate.value = 0
    detection.enforcing_failure_percentage.value = 100
    detection.failure_percentage_threshold.value = 1
    detection.failure_percentage_minimum_hosts.value = 1
    detection.failure_percentage_request_volume.value = 2
    return [builders.api_listener("svc"), builders.route_configuration("svc-routes", "c"), *served]


async def _refused_calls(stub: EchoStub, count: int) -> None:
    for _ in range(count):
        with pytest.raises(Exception, match=r"execute_batch") as refused:
            await stub.Say(Text(value="r"), timeout=5, metadata=_REFUSED)
        assert not isinstance(refused.value, grpc.aio.AioRpcError)


async def test_refused_calls_do_not_eject_a_healthy_endpoint(
    plane: ControlPlane, client: XdsClient, path: str
) -> None:
    """With failure-percentage ejection at 1% over 2 calls, 3 answered calls and 20 refused
    ones leave the endpoint in (the sweep sees 0% failed) and calls go on; 20 calls the
    backend fails then eject it at the next sweep (the setting does eject)."""
    async with echo_backends("a") as (a,):
        plane.set_all(_ejecting_cluster(a))
        async with _channel(client, path) as channel:
            stub = EchoStub(channel)
            for _ in range(3):
                assert (await stub.Say(Text(value="x"), timeout=5)).value == "a:x"
            await _refused_calls(stub, 20)
            core = channel._core
            (detector,) = core.picker._leaves["c"].detectors
            detector.sweep(random.Random(0), core.clock())  # the interval's timer, now
            assert not detector.ejected()
            assert (await stub.Say(Text(value="y"), timeout=5)).value == "a:y"
            assert dict(a.calls) == {SAY: 4}
            for _ in range(20):
                with pytest.raises(grpc.aio.AioRpcError):
                    await stub.Say(Text(value="fail:INTERNAL"), timeout=5)
            detector.sweep(random.Random(0), core.clock())
            assert len(detector.ejected()) == 1


async def test_refused_calls_count_nowhere_in_the_load_report(
    plane: ControlPlane, client: XdsClient, path: str
) -> None:
    """10 refused calls, then 3 answered and 1 failed: the LRS server receives issued 4,
    succeeded 3, errored 1 for the cluster's locality, and nothing in progress."""
    plane.load_reporting.configure(send_all_clusters=True, interval=1)
    async with echo_backends("a") as (a,):
        plane.set_all(
            [
                builders.api_listener("svc"),
                builders.route_configuration("svc-routes", "c"),
                *cluster_of("c", [a], lrs=True),
            ]
        )
        async with _channel(client, path) as channel:
            stub = EchoStub(channel)
            await _refused_calls(stub, 10)
            for _ in range(3):
                assert (await stub.Say(Text(value="x"), timeout=5)).value == "a:x"
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.Say(Text(value="fail:INTERNAL"), timeout=5)

            def in_progress() -> list[int]:
                return [
                    loc.total_requests_in_progress
                    for report in plane.load_reports
                    for stats in report.message.cluster_stats
                    for loc in stats.upstream_locality_stats
                ]

            await eventually(
                lambda: (
                    _totals(plane.load_reports).get(("c", "", "z-c")) == [4, 3, 1]
                    and in_progress()[-1:] == [0]
                ),
                8,
            )


async def test_a_driven_attempt_whose_multicallable_raises_hands_its_pick_back(
    plane: ControlPlane, client: XdsClient
) -> None:
    """When making the endpoint's grpc.aio multi-callable raises in a driven attempt, the call
    fails with that error and its pick is handed back: the picker hears no outcome for the
    endpoint (no failure for outlier detection), and circuit breaking's count is zero."""
    async with echo_backends("a") as (a,):
        plane.set_all(
            [
                builders.api_listener("svc"),
                builders.route_configuration("svc-routes", "c"),
                *cluster_of("c", [a]),
            ]
        )
        async with _channel(client, "driven") as channel:
            stub = EchoStub(channel)
            assert (await stub.Say(Text(value="x"), timeout=5)).value == "a:x"
            core: Any = channel._core  # its hooks wrapped below
            finished: list[bool] = []
            abandoned: list[int] = []
            finish, abandon, working = (
                core.picker.call_finished,
                core.picker.call_abandoned,
                core.multicallable,
            )

            def call_finished(picked: Any, ok: bool, *args: Any, **kwargs: Any) -> None:
                finished.append(ok)
                finish(picked, ok, *args, **kwargs)

            def call_abandoned(picked: Any) -> None:
                abandoned.append(picked.endpoint.port)
                abandon(picked)

            def broken(*args: Any) -> Any:
                raise RuntimeError("multicallable is broken")

            core.picker.call_finished = call_finished
            core.picker.call_abandoned = call_abandoned
            core.multicallable = broken
            core._multicallables.clear()
            fresh = channel.unary_unary(
                SAY,
                request_serializer=Text.SerializeToString,
                response_deserializer=Text.FromString,
            )
            with pytest.raises(RuntimeError, match="is broken"):
                await fresh(Text(value="y"), timeout=5)
            assert finished == []
            assert abandoned == [a.port]
            assert core.picker._leaves["c"].counter.in_flight == 0
            core.multicallable = working
            assert (await fresh(Text(value="z"), timeout=5)).value == "a:z"
            assert finished == [True]


async def test_refused_streams_eject_nothing_and_count_nowhere_in_the_load_report(
    plane: ControlPlane, client: XdsClient, unary_path: str
) -> None:
    """Server-streaming calls gRPC refuses (direct streams, and `XdsCall`s with the guard
    forced off): 20 of them and 3 read to their end leave the endpoint in at the sweep, and
    the LRS server receives issued 3, succeeded 3, errored 0."""
    plane.load_reporting.configure(send_all_clusters=True, interval=1)
    async with echo_backends("a") as (a,):
        resources = _ejecting_cluster(a)
        resources[2].lrs_server.self.SetInParent()
        plane.set_all(resources)
        async with _channel(client, unary_path) as channel:
            stub = EchoStub(channel)
            for _ in range(20):
                call = stub.Count(Text(value="1"), timeout=5, metadata=_REFUSED)
                with pytest.raises(grpc.aio.AioRpcError) as refused:  # C-core's own status
                    await call.read()
                assert refused.value.code() is grpc.StatusCode.INTERNAL
                assert refused.value.details() == "Invalid metadata"
            for _ in range(3):
                assert [m.value async for m in stub.Count(Text(value="1"), timeout=5)] == ["a:0"]
            core = channel._core
            (detector,) = core.picker._leaves["c"].detectors
            detector.sweep(random.Random(0), core.clock())
            assert not detector.ejected()
            await eventually(
                lambda: _totals(plane.load_reports).get(("c", "", "z-c")) == [3, 3, 0], 8
            )
