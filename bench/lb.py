"""Benchmark: the per-pick cost of the composed picker (`xdsclient.lb.ComposedPicker`).

One listener -> route -> cluster of 3 localities x 10 endpoints (all READY), picked through the
whole tree: route match, drops, circuit breaking, priority, the child, the endpoint picker. Each
call is reported finished, so circuit breaking (and least request) count in and out. Rows: round
robin, least request and ring hash (a header hash policy), each bare and with drops (a 0-ppm
category, so every pick draws and none drops) and circuit breaking (max_requests 1024) on.
Prints microseconds of CPU time per pick (process time, so other work on a shared machine
counts less), the best of ``--repeat`` runs.

    python bench/lb.py [--picks 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from xdsclient import ClusterConfig, XdsConfig
from xdsclient.lb import ComposedPicker, ConnectivityState
from xdsclient.resources import (
    ClusterLoadAssignmentView,
    ClusterView,
    ListenerView,
    RouteConfigurationView,
)
from xdsclient.testing import builders
from xdsclient.testing.builders import LocalitySpec


def config(lb_policy: str, guarded: bool) -> XdsConfig:
    """A snapshot with one cluster balanced by ``lb_policy``; drops and a limit if guarded."""
    routes = builders.route_configuration("r", "c")
    if lb_policy == "ring_hash":
        routes.virtual_hosts[0].routes[0].route.hash_policy.add().header.header_name = "user"
    cluster = builders.cluster("c", lb_policy=lb_policy)
    localities = [
        LocalitySpec(endpoints=[("10.0.0.1", 1000 * z + i) for i in range(10)], zone=f"z{z}")
        for z in range(3)
    ]
    assignment: Any = builders.cluster_load_assignment("c", localities)
    if guarded:
        cluster.circuit_breakers.thresholds.add().max_requests.value = 1024
        drop = assignment.policy.drop_overloads.add(category="throttle")
        drop.drop_percentage.denominator = 2  # parts per million, numerator 0
    route_config = RouteConfigurationView.from_proto(routes)
    entry = ClusterConfig(
        name="c",
        cluster=ClusterView.from_proto(cluster),
        endpoints=ClusterLoadAssignmentView.from_proto(assignment),
    )
    return XdsConfig(
        listener=ListenerView.from_proto(builders.api_listener("l")),
        route_config=route_config,
        virtual_host=route_config.virtual_hosts[0],
        clusters={"c": entry},
    )


def per_pick(lb_policy: str, guarded: bool, picks: int) -> float:
    """Microseconds of CPU time per pick (and finish) through the composed picker."""
    picker = ComposedPicker()
    snapshot = config(lb_policy, guarded)
    picker.update(snapshot, 0.0)
    assert snapshot.clusters["c"].endpoints is not None
    for endpoint in snapshot.clusters["c"].endpoints.healthy_endpoints():
        picker.set_endpoint_state((endpoint.address, endpoint.port), ConnectivityState.READY, 0.0)
    rand = random.Random(0)
    headers = [{"user": f"user-{i}"} for i in range(256)]
    pick, finished = picker.pick, picker.call_finished
    start = time.process_time()  # CPU time: other work on a shared machine counts less
    for i in range(picks):
        result = pick("/svc/Method", headers[i & 255], rand, 1.0)
        finished(result, True, 1.0)
    return (time.process_time() - start) / picks * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--picks", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'policy':<14} {'drops+circuit breaking':<24} {'us/pick':>8}")
    for lb_policy in ("round_robin", "least_request", "ring_hash"):
        for guarded in (False, True):
            cost = min(per_pick(lb_policy, guarded, args.picks) for _ in range(args.repeat))
            print(f"{lb_policy:<14} {'on' if guarded else 'off':<24} {cost:>8.2f}")


if __name__ == "__main__":
    main()
