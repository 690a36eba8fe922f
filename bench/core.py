"""Benchmark: the protocol core against the protobuf floor.

Pushes one SotW CDS response and one Delta CDS response of N realistic clusters through
`xdsclient.Session` (parse the wire bytes, validate, decode every Cluster, cache, emit events,
build the ACK) and compares with the floor: parsing the response and unpacking every Any into a
Cluster with protobuf alone. Prints microseconds per resource and the ratio (target: <= 2x).

    python bench/core.py [--sizes 10000 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import discovery_pb2

from xdsclient import ProtocolOptions, ResourceType, Session

# The core's own cost: clusters decode into their protobuf message (bench/views.py measures the
# validated views on top).
CLUSTER = ResourceType.for_message(cluster_pb2.Cluster, all_resources_required_in_sotw=True)


def make_cluster(i: int) -> Any:
    c = cluster_pb2.Cluster(name=f"outbound|8080||service-{i}.namespace-{i % 50}.svc.cluster.local")
    c.type = cluster_pb2.Cluster.EDS
    c.eds_cluster_config.eds_config.ads.SetInParent()
    c.eds_cluster_config.service_name = c.name
    c.connect_timeout.seconds = 10
    c.lb_policy = cluster_pb2.Cluster.LEAST_REQUEST
    threshold = c.circuit_breakers.thresholds.add()
    threshold.max_connections.value = 4294967295
    threshold.max_requests.value = 4294967295
    c.metadata.filter_metadata["istio"].fields["default_original_port"].number_value = 8080
    c.metadata.filter_metadata["istio"].fields["services"].string_value = f"service-{i}"
    return c


def sotw_bytes(n: int) -> tuple[bytes, list[str]]:
    response = discovery_pb2.DiscoveryResponse(
        type_url=CLUSTER.type_url, version_info="1", nonce="n1"
    )
    names = []
    for i in range(n):
        c = make_cluster(i)
        names.append(c.name)
        response.resources.add(type_url=CLUSTER.type_url, value=c.SerializeToString())
    return response.SerializeToString(), names


def delta_bytes(n: int) -> tuple[bytes, list[str]]:
    response = discovery_pb2.DeltaDiscoveryResponse(type_url=CLUSTER.type_url, nonce="n1")
    names = []
    for i in range(n):
        c = make_cluster(i)
        names.append(c.name)
        resource = response.resources.add(name=c.name, version="1")
        resource.resource.type_url = CLUSTER.type_url
        resource.resource.value = c.SerializeToString()
    return response.SerializeToString(), names


# The floors keep what they unpack, as any client must: discarding each message at once lets upb
# reuse one arena and measures a third of the real cost of decoding N resources.
KEPT: list[Any] = []


def floor_sotw(wire: bytes) -> None:
    response = discovery_pb2.DiscoveryResponse.FromString(wire)
    from_string = cluster_pb2.Cluster.FromString
    KEPT[:] = [from_string(packed.value) for packed in response.resources]


def floor_delta(wire: bytes) -> None:
    response = discovery_pb2.DeltaDiscoveryResponse.FromString(wire)
    from_string = cluster_pb2.Cluster.FromString
    KEPT[:] = [from_string(resource.resource.value) for resource in response.resources]


def floor_any_unpack(wire: bytes) -> None:
    """The floor written with Any.Unpack, as most users would (for reference)."""
    response = discovery_pb2.DiscoveryResponse.FromString(wire)
    kept = []
    for packed in response.resources:
        message = cluster_pb2.Cluster()
        packed.Unpack(message)
        kept.append(message)
    KEPT[:] = kept


def core_run(wire: bytes, names: list[str], delta: bool, wildcard: bool) -> Callable[[], None]:
    """A closure that loads the response into a fresh session (setup excluded from timing)."""
    response_class = (
        discovery_pb2.DeltaDiscoveryResponse if delta else discovery_pb2.DiscoveryResponse
    )
    state: dict[str, Session] = {}

    def setup() -> None:
        s = Session(
            node=base_pb2.Node(id="bench"),
            resource_types=[CLUSTER],
            delta=delta,
            options=ProtocolOptions(),
        )
        for name in ["*"] if wildcard else names:
            s.subscribe(CLUSTER.type_url, name)
        s.connect(0.0)
        s.requests_to_send(0.0)
        state["s"] = s

    def run() -> None:
        s = state["s"]
        events = s.receive(response_class.FromString(wire), 1.0)
        (ack,) = s.requests_to_send(1.0)
        assert len(events) == len(names), len(events)
        assert not ack.HasField("error_detail")

    run.setup = setup  # type: ignore[attr-defined]
    return run


def timeit(fn: Callable[[], None], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        KEPT.clear()
        setup = getattr(fn, "setup", None)
        if setup is not None:
            setup()
        gc.collect()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    rows = []
    for n in args.sizes:
        sotw, names = sotw_bytes(n)
        delta, _ = delta_bytes(n)
        f_sotw = timeit(partial(floor_sotw, sotw), args.repeat)
        f_delta = timeit(partial(floor_delta, delta), args.repeat)
        f_unpack = timeit(partial(floor_any_unpack, sotw), args.repeat)
        cases = [
            ("SotW, named", core_run(sotw, names, delta=False, wildcard=False), f_sotw),
            ("SotW, wildcard", core_run(sotw, names, delta=False, wildcard=True), f_sotw),
            ("Delta, named", core_run(delta, names, delta=True, wildcard=False), f_delta),
            ("Delta, wildcard", core_run(delta, names, delta=True, wildcard=True), f_delta),
        ]
        rows.append((n, "SotW floor written with Any.Unpack", f_unpack, f_sotw))
        for label, fn, floor in cases:
            rows.append((n, label, timeit(fn, args.repeat), floor))

    print(f"{'N':>8}  {'case':<38} {'core us/res':>12} {'floor us/res':>13} {'ratio':>6}")
    for n, label, total, floor in rows:
        per, floor_per, ratio = total / n * 1e6, floor / n * 1e6, total / floor
        print(f"{n:>8}  {label:<38} {per:>12.2f} {floor_per:>13.2f} {ratio:>5.2f}x")
    print("floor: parse the response + Cluster.FromString of every resource, kept (upb alone).")
    print("core: parse + Session.receive (decode, cache, events) + the ACK request; Clusters are")
    print("decoded into protobuf messages here (bench/views.py adds the validated views).")


if __name__ == "__main__":
    main()
