"""Benchmark: the per-pick cost of the composed picker (`xdsclient.lb.ComposedPicker`).

One listener -> route -> cluster of 3 localities x 10 endpoints (all READY), picked through the
whole tree: route match, drops, circuit breaking, priority, the child, the endpoint picker. Each
call is reported finished, so circuit breaking (and least request) count in and out. Rows: round
robin, least request and ring hash (a header hash policy), each bare and with drops (a 0-ppm
category, so every pick draws and none drops) and circuit breaking (max_requests 1024) on.
Prints microseconds of CPU time per pick (process time, so other work on a shared machine
counts less), the best of ``--repeat`` runs.

A second table measures the picker at scale: ``--endpoints`` endpoints (10,000 by default) in
10 localities, round robin and ring hash. Rows: every endpoint made READY one connectivity
change at a time (as a channel reports them), milliseconds in all; an EDS update changing one
endpoint (a new view decoded from the wire, as the client delivers it), milliseconds, the
best of 9; and how many KiB the picker's memory grew between the 20th and the 200th update each
moving a 3-endpoint assignment to 3 new endpoints (tracemalloc; about 0 when the picker keeps
state for the current endpoints only).

A third table: the pick as a call of a front end makes it (`pick_in` in the cluster the route
chose, after asking the picker's next timer), round robin over one and over three localities.

    python bench/lb.py [--picks 20000] [--repeat 5] [--endpoints 10000] [--picks-only]
"""

from __future__ import annotations

import argparse
import gc
import random
import time
import tracemalloc
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


def config(lb_policy: str, guarded: bool, zones: int = 3) -> XdsConfig:
    """A snapshot with one cluster of ``zones`` localities balanced by ``lb_policy``; drops
    and a limit if guarded."""
    routes = builders.route_configuration("r", "c")
    if lb_policy == "ring_hash":
        routes.virtual_hosts[0].routes[0].route.hash_policy.add().header.header_name = "user"
    cluster = builders.cluster("c", lb_policy=lb_policy)
    localities = [
        LocalitySpec(endpoints=[("10.0.0.1", 1000 * z + i) for i in range(10)], zone=f"z{z}")
        for z in range(zones)
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


def per_pick(lb_policy: str, guarded: bool, picks: int, *, zones: int = 3) -> float:
    """Microseconds of CPU time per pick (and finish) through the composed picker."""
    picker = ComposedPicker()
    snapshot = config(lb_policy, guarded, zones)
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


def per_call_pick(zones: int, picks: int) -> float:
    """Microseconds of CPU time per pick as a front end's call makes it (`PlaneCore.pick_now`):
    the picker's next timer, then a pick in the cluster the call's route chose (`pick_in`, no
    routing), then its finish; round robin, no drops, no limit, ``zones`` localities."""
    picker = ComposedPicker()
    snapshot = config("round_robin", False, zones)
    picker.update(snapshot, 0.0)
    assert snapshot.clusters["c"].endpoints is not None
    for endpoint in snapshot.clusters["c"].endpoints.healthy_endpoints():
        picker.set_endpoint_state((endpoint.address, endpoint.port), ConnectivityState.READY, 0.0)
    rand = random.Random(0)
    headers: dict[str, str] = {}
    timer, pick, finished = picker.next_deadline, picker.pick_in, picker.call_finished
    start = time.process_time()
    for _ in range(picks):
        timer()
        result = pick("c", headers, rand, 1.0, request_hash=0)
        finished(result, True, 1.0)
    return (time.process_time() - start) / picks * 1e6


def scale_config(lb_policy: str, ports: list[int]) -> XdsConfig:
    """A snapshot of one cluster whose endpoints are ``ports`` on one address, in 10
    localities (fewer for fewer endpoints)."""
    cluster = builders.cluster("c", lb_policy=lb_policy)
    zones = min(10, len(ports))
    localities = [
        LocalitySpec(endpoints=[("10.0.0.1", p) for p in ports[z::zones]], zone=f"z{z}")
        for z in range(zones)
    ]
    route_config = RouteConfigurationView.from_proto(builders.route_configuration("r", "c"))
    assignment = builders.cluster_load_assignment("c", localities)
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


def all_ready(lb_policy: str, endpoints: int) -> tuple[float, ComposedPicker]:
    """Milliseconds of CPU time to report every endpoint READY, one change at a time."""
    picker = ComposedPicker()
    picker.update(scale_config(lb_policy, list(range(1, endpoints + 1))), 0.0)
    keys = [("10.0.0.1", port) for port in range(1, endpoints + 1)]
    start = time.process_time()
    for key in keys:
        picker.set_endpoint_state(key, ConnectivityState.READY, 0.0)
    elapsed = (time.process_time() - start) * 1e3
    assert picker.cluster_state("c") is ConnectivityState.READY
    return elapsed, picker


def one_changed(lb_policy: str, endpoints: int, updates: int = 9) -> float:
    """Milliseconds of CPU time of an EDS update moving one endpoint of all READY ones (the
    best of ``updates``, as the machine is shared)."""
    _, picker = all_ready(lb_policy, endpoints)
    ports = list(range(1, endpoints + 1))
    snapshots = []
    for i in range(updates):
        ports[i] = endpoints + 1 + i  # one endpoint replaced by a new one per update
        snapshots.append(scale_config(lb_policy, list(ports)))
    costs = []
    for snapshot in snapshots:
        start = time.process_time()
        picker.update(snapshot, 1.0)
        costs.append((time.process_time() - start) * 1e3)
    return min(costs)


def growth(lb_policy: str, pushes: int = 200) -> float:
    """KiB the picker's memory grew from push 20 to push ``pushes``, each push moving a
    3-endpoint assignment to 3 new endpoints, all made READY (0 when state follows the
    current endpoints only)."""
    picker = ComposedPicker()
    snapshots = [
        scale_config(lb_policy, [3 * push + i + 1 for i in range(3)]) for push in range(pushes)
    ]
    tracemalloc.start()
    try:
        for push, snapshot in enumerate(snapshots):
            if push == 20:
                gc.collect()
                early = tracemalloc.get_traced_memory()[0]
            picker.update(snapshot, float(push))
            for port in range(3 * push + 1, 3 * push + 4):
                picker.set_endpoint_state(("10.0.0.1", port), ConnectivityState.READY, push)
        gc.collect()
        late = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return (late - early) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--picks", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--endpoints", type=int, default=10_000)
    parser.add_argument("--scale-only", action="store_true", help="only the scale table")
    parser.add_argument("--picks-only", action="store_true", help="only the per-pick tables")
    args = parser.parse_args()
    if not args.picks_only:
        scale(args.endpoints)
    if args.scale_only:
        return
    print(f"{'policy':<14} {'drops+circuit breaking':<24} {'us/pick':>8}")
    for lb_policy in ("round_robin", "least_request", "ring_hash"):
        for guarded in (False, True):
            cost = min(per_pick(lb_policy, guarded, args.picks) for _ in range(args.repeat))
            print(f"{lb_policy:<14} {'on' if guarded else 'off':<24} {cost:>8.2f}")
    print(f"\n{'call path pick (pick_in)':<39} {'us/pick':>8}")
    for zones in (1, 3):
        cost = min(per_call_pick(zones, args.picks) for _ in range(args.repeat))
        label = f"round_robin, {zones} localit{'y' if zones == 1 else 'ies'}"
        print(f"{label:<39} {cost:>8.2f}")


def scale(endpoints: int) -> None:
    """The scale table: connectivity changes, one-endpoint updates, states held."""
    print(f"{'policy':<14} {'all READY, ms':>14} {'one changed, ms':>16} {'growth, KiB':>12}")
    for lb_policy in ("round_robin", "ring_hash"):
        ready = all_ready(lb_policy, endpoints)[0]
        if ready < 1000:  # best of 3 unless it is slow
            ready = min(ready, *(all_ready(lb_policy, endpoints)[0] for _ in range(2)))
        changed = one_changed(lb_policy, endpoints)
        held = growth(lb_policy)
        print(f"{lb_policy:<14} {ready:>14.1f} {changed:>16.2f} {held:>12.1f}")
    print()


if __name__ == "__main__":
    main()
