"""The call path's route and fault statuses against grpcio's own ``xds:///`` channel.

Why: C-core is the reference for a failed call's code and details. A child process (C-core
reads its bootstrap once per process) opens ``xds:///<listener>`` to the test control plane
and makes each call; our side decodes the very messages served with our views and runs
`CallPlan` for the same call. Compared: the status code and details of calls no route
matches, routes that do not forward, a missing virtual host (inline and RDS), fault aborts
(fixed and header-controlled) and a call that goes through (OK on grpcio, an attempt here).
"""

from __future__ import annotations

import random
from typing import Any

from envoy.config.route.v3 import route_pb2

from tests.lb.differential_pickers import METHOD, backends, run_grpcio
from xdsclient._call import ActiveFaults, Attempt, CallConfig, CallPlan, CallRequest, Finish
from xdsclient.resources import ListenerView, RouteConfigurationView
from xdsclient.testing import ControlPlane, builders

from .builders import add_route, fault, listener, override

_CHILD = r"""
import json, sys, grpc
channels = {}
out = []
for name, method, headers in json.loads(sys.stdin.read()):
    if name not in channels:
        channels[name] = grpc.insecure_channel("xds:///" + name)
    call = channels[name].unary_unary(method)
    try:
        call(b"", metadata=list(headers.items()), timeout=20)
        out.append(["SENT", ""])
    except grpc.RpcError as error:
        if error.code() == grpc.StatusCode.UNIMPLEMENTED and error.details() == "Method not found!":
            out.append(["SENT", ""])  # routed: the backend answered
        else:
            out.append([error.code().name, error.details()])
print(json.dumps(out), flush=True)
"""

ROUTED = "diff"
NO_HOST_INLINE = "nohost-inline"
NO_HOST_RDS = "nohost-rds"
SERVED = "served"


def _routes() -> Any:
    routes = route_pb2.RouteConfiguration(name=f"{ROUTED}-routes")
    vhost = routes.virtual_hosts.add(name="vh", domains=[ROUTED])
    add_route(vhost, "/lbtest.Who/", SERVED)
    add_route(vhost, "/redirect/", cluster=None).redirect.host_redirect = "elsewhere"
    add_route(vhost, "/nonfwd/", cluster=None).non_forwarding_action.SetInParent()
    header_route = add_route(vhost, "/hdr/", SERVED)
    header_route.match.headers.add(name="x-env").string_match.exact = "prod"
    fixed = add_route(vhost, "/fault/", SERVED)
    fixed.typed_per_filter_config["fault0"].Pack(
        override(fault(abort_grpc=8, abort_percent=(100, 0)))
    )
    by_header = add_route(vhost, "/hfault/", SERVED)
    by_header.typed_per_filter_config["fault0"].Pack(
        override(fault(header_abort=True, abort_percent=(100, 0)))
    )
    return routes


def _elsewhere(name: str) -> Any:
    routes = route_pb2.RouteConfiguration(name=name)
    add_route(routes.virtual_hosts.add(name="vh", domains=["other"]), "", SERVED)
    return routes


CALLS: list[tuple[str, str, dict[str, str]]] = [
    (ROUTED, METHOD, {}),
    (ROUTED, "/other.Svc/M", {}),
    (ROUTED, "/redirect/M", {}),
    (ROUTED, "/nonfwd/M", {}),
    (ROUTED, "/hdr/M", {"x-env": "prod"}),
    (ROUTED, "/hdr/M", {"x-env": "dev"}),
    (ROUTED, "/fault/M", {}),
    (ROUTED, "/hfault/M", {"x-envoy-fault-abort-grpc-request": "7"}),
    (ROUTED, "/hfault/M", {}),
    (NO_HOST_INLINE, METHOD, {}),
    (NO_HOST_RDS, METHOD, {}),
]


def _resources(port: int) -> list[Any]:
    faults = (fault(),)
    spec = builders.LocalitySpec(endpoints=[("127.0.0.1", port)], region="r")
    return [
        listener(name=ROUTED, rds=f"{ROUTED}-routes", faults=faults),
        _routes(),
        listener(_elsewhere("inline"), name=NO_HOST_INLINE, faults=faults),
        listener(name=NO_HOST_RDS, rds="elsewhere", faults=faults),
        _elsewhere("elsewhere"),
        builders.cluster(SERVED, eds_service_name=f"{SERVED}-svc"),
        builders.cluster_load_assignment(f"{SERVED}-svc", [spec]),
    ]


def _ours(resources: list[Any]) -> list[list[str]]:
    listeners = {
        m.name: ListenerView.from_proto(m) for m in resources if hasattr(m, "api_listener")
    }
    routes = {
        m.name: RouteConfigurationView.from_proto(m)
        for m in resources
        if isinstance(m, route_pb2.RouteConfiguration)
    }
    results = []
    for name, method, headers in CALLS:
        view = listeners[name]
        assert view.api_listener is not None
        config = CallConfig.from_listener(view, routes.get(view.api_listener.route_config_name))
        request = CallRequest(authority=name, path=method, metadata=tuple(headers.items()))
        plan = CallPlan.begin(request, config, now=0.0, rng=random.Random(0), faults=ActiveFaults())
        step = plan.start(0.0)
        if isinstance(step, Attempt):
            results.append(["SENT", ""])
        else:
            assert isinstance(step, Finish)
            results.append([step.status.code.name, step.status.details])
    return results


async def _grpc(resources: list[Any]) -> list[list[str]]:
    async with ControlPlane() as plane:
        plane.set_all(resources)
        results: list[list[str]] = await run_grpcio(plane, "call-diff", _CHILD, (), CALLS)
    return results


async def test_route_and_fault_statuses_match_grpcio() -> None:
    """Each call fails (or not) with the code and details grpcio's xDS channel gives it."""
    async with backends(1) as ports:
        resources = _resources(ports[0])
        theirs = await _grpc(resources)
    ours = _ours(resources)
    assert ours == theirs
