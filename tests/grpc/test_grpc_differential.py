"""`XdsChannel`'s failed calls against grpcio's own ``xds:///`` channel: same control plane,
same resources, same node ID, the status code and details of each call compared.

Why: C-core is the reference for what a caller sees when the configuration cannot carry a call.
The child process (C-core reads its bootstrap once per process) makes each call on grpcio's
channel; our side makes it on an `XdsChannel` over a client of the same control plane. Compared:
no route matching, a route to a cluster the server does not have, a virtual host missing for
the authority, a listener the server does not have, a call the assignment drops, a cluster
whose every endpoint refuses connections, assignments with no localities or only empty ones,
a NACKed cluster (the reason, which each client words its own way, left out), and a call that
goes through. The calls
run concurrently: C-core waits its 15 s does-not-exist timer for the missing cluster and
listener (no channel option shortens it), which makes this test take about 15 s.
"""

from __future__ import annotations

import asyncio
import re
import socket
from typing import Any

import grpc
import pytest
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.type.v3 import percent_pb2

from tests.call.builders import add_route, listener, route_config
from tests.lb.differential_pickers import METHOD, backends, run_grpcio
from xdsclient import ClientOptions, XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.testing import ControlPlane, builders

NODE = "channel-diff"
_CHILD = r"""
import json, sys, grpc
from concurrent.futures import ThreadPoolExecutor
calls = json.loads(sys.stdin.read())
channels = {name: grpc.insecure_channel("xds:///" + name) for name, _ in calls}

def one(call):
    name, method = call
    try:
        channels[name].unary_unary(method)(b"", timeout=20)
        return ["SENT", ""]
    except grpc.RpcError as error:
        if error.code() == grpc.StatusCode.UNIMPLEMENTED and error.details() == "Method not found!":
            return ["SENT", ""]
        return [error.code().name, error.details()]

with ThreadPoolExecutor(len(calls)) as pool:
    print(json.dumps(list(pool.map(one, calls))), flush=True)
"""

CALLS = [
    ("routed", METHOD),  # goes through
    ("routed", "/other.Svc/M"),  # no route matches
    ("missing", METHOD),  # a cluster the server does not have
    ("nohost", METHOD),  # no virtual host for the authority
    ("absent", METHOD),  # no such listener
    ("dropping", METHOD),  # every call dropped by the assignment's drop_overloads
    ("down", METHOD),  # the only endpoint refuses connections
    ("empty", METHOD),  # an assignment with no localities
    ("hollow", METHOD),  # an assignment whose one locality has no endpoints
    ("nacked", METHOD),  # a cluster the client rejects (its why, worded differently, left out)
]
#: why a resource is invalid: each client words it its own way
_INVALID_WHY = re.compile(r"(invalid resource: ).*( \(node ID)")
#: C-core's reason a connection failed (the OS error), which grpc.aio does not tell us
_OS_REASON = re.compile(r"(Failed to connect to remote host): [^(]*? (\(xDS node ID)")


def _resources(port: int, refused: int) -> list[Any]:
    routes = route_config("routed-routes", domains=("routed",))
    add_route(routes.virtual_hosts[0], "/lbtest.", "served")
    to_missing = route_config("missing-routes", domains=("missing",))
    add_route(to_missing.virtual_hosts[0], "", "missing-cluster")
    elsewhere = route_config("elsewhere", domains=("other",))
    add_route(elsewhere.virtual_hosts[0], "", "served")
    spec = builders.LocalitySpec(endpoints=[("127.0.0.1", port)], region="r")
    to_dropping = route_config("dropping-routes", domains=("dropping",))
    add_route(to_dropping.virtual_hosts[0], "", "dropping")
    dropping = builders.cluster_load_assignment("dropping", [spec])
    dropping.policy.drop_overloads.add(
        category="throttle", drop_percentage=percent_pb2.FractionalPercent(numerator=100)
    )
    to_down = route_config("down-routes", domains=("down",))
    add_route(to_down.virtual_hosts[0], "", "down")
    resources = []
    for name, localities in (("empty", None), ("hollow", [])):
        routes = route_config(f"{name}-routes", domains=(name,))
        add_route(routes.virtual_hosts[0], "", name)
        assignment = (
            endpoint_pb2.ClusterLoadAssignment(cluster_name=name)
            if localities is None
            else builders.cluster_load_assignment(name, localities)
        )
        resources += [
            listener(name=name, rds=f"{name}-routes"),
            routes,
            builders.cluster(name),
            assignment,
        ]
    nacked = builders.cluster("nacked")
    nacked.eds_cluster_config.eds_config.path_config_source.path = "/not/ads"
    to_nacked = route_config("nacked-routes", domains=("nacked",))
    add_route(to_nacked.virtual_hosts[0], "", "nacked")
    return [
        *resources,
        listener(name="nacked", rds="nacked-routes"),
        to_nacked,
        nacked,
        listener(name="down", rds="down-routes"),
        to_down,
        builders.cluster("down"),
        builders.cluster_load_assignment("down", [("127.0.0.1", refused)]),
        listener(name="dropping", rds="dropping-routes"),
        to_dropping,
        builders.cluster("dropping"),
        dropping,
        listener(name="routed", rds="routed-routes"),
        routes,
        listener(name="missing", rds="missing-routes"),
        to_missing,
        listener(name="nohost", rds="elsewhere"),
        elsewhere,
        builders.cluster("served", eds_service_name="served-svc"),
        builders.cluster_load_assignment("served-svc", [spec]),
    ]


async def _theirs(plane: ControlPlane) -> list[list[str]]:
    results: list[list[str]] = await run_grpcio(plane, NODE, _CHILD, (), CALLS, timeout=50)
    return results


async def _ours(plane: ControlPlane) -> list[list[str]]:
    options = ClientOptions(does_not_exist_timeout=2.0)
    async with XdsClient(plane.address, node_id=NODE, options=options) as client:
        channels = {name: XdsChannel(f"xds:///{name}", client=client) for name, _ in CALLS}
        try:
            results = await asyncio.gather(
                *(_one(channels[name], method) for name, method in CALLS)
            )
        finally:
            for channel in channels.values():
                await channel.close()
    return results


async def _one(channel: XdsChannel, method: str) -> list[str]:
    try:
        await channel.unary_unary(method)(b"", timeout=20)
    except grpc.aio.AioRpcError as error:
        return [error.code().name, error.details() or ""]
    return ["SENT", ""]


@pytest.mark.timeout(120)  # grpcio waits its 15 s does-not-exist timer for the missing ones
async def test_failed_calls_have_grpcios_codes_and_details() -> None:
    """Each call fails (or goes through) with the code and details grpcio's ``xds:///``
    channel gives it: no route, a missing cluster, no virtual host, a missing listener, a
    drop, every endpoint refusing connections (C-core's OS error left out), no endpoints, a
    NACKed cluster (the validation message aside)."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        refused = closed.getsockname()[1]  # nothing listens there once the socket closes
    async with backends(1) as ports, ControlPlane() as plane:
        plane.set_all(_resources(ports[0], refused))
        theirs, ours = await asyncio.gather(_theirs(plane), _ours(plane))
    theirs = [[code, _OS_REASON.sub(r"\1 \2", details)] for code, details in theirs]
    assert _INVALID_WHY.search(ours[-1][1]) is not None
    ours, theirs = (
        [[code, _INVALID_WHY.sub(r"\1...\2", details)] for code, details in side]
        for side in (ours, theirs)
    )
    assert ours == theirs
