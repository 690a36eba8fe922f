"""`XdsChannel`'s ring hash and load reports against grpcio's own ``xds:///`` channel, with one
control plane and real backends.

Why: gRFC A42 makes a ring-hash pick a function of the request hash and the ring, so the same
header value must land on the same backend on both channels; and with ``lrs_server`` each
channel reports the calls it made, so the same traffic must give the same per-locality counts
at the control plane's LRS server."""

from __future__ import annotations

import collections
import contextlib
import random

import grpc

from tests.helpers import eventually
from tests.lb.differential_pickers import grpc_load_session
from tests.lrs.test_grpc_differential import Totals, _counted, _reports_of, _totals
from xdsclient import XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.testing import ControlPlane, builders

from .differential import Call, both
from .echo import SAY, cluster_of, echo_backends

USERS = [f"user-{i}" for i in range(16)]


async def test_ring_hash_sends_each_header_value_to_one_backend_the_one_grpcio_picks(
    plane: ControlPlane,
) -> None:
    """A ring-hash cluster of three backends hashed on header ``x-user``: each of 16 users'
    three calls land on one backend on each channel, the same backend on both, and the users
    spread over more than one backend."""
    async with echo_backends("a", "b", "c") as backends:
        routes = builders.route_configuration("ring-routes", "ring")
        routes.virtual_hosts[0].routes[0].route.hash_policy.add().header.header_name = "x-user"
        plane.set_all(
            [
                builders.api_listener("ring"),
                routes,
                *cluster_of("ring", backends, lb_policy="ring_hash"),
            ]
        )
        calls = [
            Call(listener="ring", metadata=(("x-user", user),), wait_for_ready=True)
            for user in USERS
            for _ in range(3)
        ]
        theirs, ours = await both(plane, calls, node="ring")
    for side in (theirs, ours):
        picked: dict[str, set[str]] = collections.defaultdict(set)
        for call, result in zip(calls, side, strict=True):
            picked[call.metadata[0][1]].add(result.backend)
        assert all(len(found) == 1 for found in picked.values()), picked
        assert len(set().union(*picked.values())) > 1, picked
    assert [r.backend for r in ours] == [r.backend for r in theirs]


LRS_LISTENER = "lrs"
MISSING = "/echo.Echo/Missing"  # the backend does not serve it: UNIMPLEMENTED, an errored call
EXPECTED: Totals = {("reported", "", "", "z-reported", ""): (15, 12, 3, 0)}


async def test_load_reports_from_the_same_calls_match_grpcios(plane: ControlPlane) -> None:
    """12 answered and 3 unimplemented calls to a cluster with ``lrs_server``, on each channel
    (two nodes): the LRS server receives the same issued, succeeded, errored and in-progress
    counts for the cluster's locality from both."""
    plane.load_reporting.configure(send_all_clusters=True, interval=1)
    async with echo_backends("a", "b") as backends:
        plane.set_all(
            [
                builders.api_listener(LRS_LISTENER),
                builders.route_configuration(f"{LRS_LISTENER}-routes", "reported"),
                *cluster_of("reported", backends, lrs=True),
            ]
        )
        async with grpc_load_session(plane, LRS_LISTENER, "lrs-grpc") as session:
            codes = await session.calls([(SAY, 12), (MISSING, 3)])
            assert codes == ["OK"] * 12 + ["UNIMPLEMENTED"] * 3
            await eventually(lambda: _reported(plane, "lrs-grpc") == EXPECTED, 10)
        async with (
            XdsClient(plane.address, node_id="lrs-ours") as client,
            XdsChannel(f"xds:///{LRS_LISTENER}", client=client, rng=random.Random(3)) as channel,
        ):
            for method, count in ((SAY, 12), (MISSING, 3)):
                call = channel.unary_unary(method)
                for _ in range(count):
                    with contextlib.suppress(grpc.aio.AioRpcError):  # the unimplemented ones
                        await call(b"", timeout=5)
            await eventually(lambda: _reported(plane, "lrs-ours") == EXPECTED, 10)
    assert _reported(plane, "lrs-ours") == _reported(plane, "lrs-grpc") == EXPECTED


def _reported(plane: ControlPlane, node: str) -> Totals:
    """The counts ``node`` reported, summed, per (cluster, service, locality)."""
    return _counted(_totals(_reports_of(plane, node)))
