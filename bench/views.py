"""Benchmark: validated views per resource type, against the protobuf floor, and their memory.

For each built-in view type, 10,000 realistic resources are decoded by the type's decoder
(parse + validate + build the view) and by protobuf alone (parse, kept); then pushed through a
SotW session so that the cache holds them, measuring with tracemalloc the bytes the cache holds
per resource beyond its wire bytes. Targets: decoding at most 3x the floor; at most 2 KB beyond
the wire bytes for a cached Cluster or ClusterLoadAssignment.

    python bench/views.py [--n 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import discovery_pb2

sys.path.insert(0, os.path.dirname(__file__))

import core
import xds_config as cfg

from xdsclient import Session
from xdsclient.resources import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE_CONFIGURATION,
    ResourceType,
    cluster_type,
)


def realistic_endpoints(i: int) -> Any:
    message = cfg.endpoints(i)
    group = message.endpoints[0]
    for k in range(1, 3):  # three endpoints in the locality
        lb = group.lb_endpoints.add()
        lb.endpoint.address.socket_address.address = f"10.{k}.{i % 250}.{i % 200}"
        lb.endpoint.address.socket_address.port_value = 8080
    group.locality.zone = f"zone-{i % 3}"
    return message


def realistic_route(i: int) -> Any:
    message = cfg.route_configuration(10)
    message.name = f"route-{i}"
    return message


def realistic_listener(i: int) -> Any:
    message = cfg.listener()
    message.name = f"listener-{i}"
    return message


def realistic_cluster(i: int) -> Any:
    message = core.make_cluster(i)
    message.lb_policy = 0  # ROUND_ROBIN: LEAST_REQUEST without its config is fine too
    return message


def tls_cluster(i: int) -> Any:
    """A realistic cluster with mTLS from two provider instances (checked by the client's
    decoder against its bootstrap's)."""
    from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

    message = realistic_cluster(i)
    context = tls_pb2.UpstreamTlsContext()
    common = context.common_tls_context
    common.validation_context.ca_certificate_provider_instance.instance_name = "roots"
    common.tls_certificate_provider_instance.instance_name = "identity"
    message.transport_socket.name = "envoy.transport_sockets.tls"
    message.transport_socket.typed_config.Pack(context)
    return message


CASES: list[tuple[str, ResourceType[Any], Callable[[int], Any]]] = [
    ("Cluster", CLUSTER, realistic_cluster),
    ("Cluster (mTLS, no bootstrap)", CLUSTER, tls_cluster),
    ("Cluster (mTLS, client's check)", cluster_type(["roots", "identity"]), tls_cluster),
    ("ClusterLoadAssignment", ENDPOINT, realistic_endpoints),
    ("RouteConfiguration (10 routes)", ROUTE_CONFIGURATION, realistic_route),
    ("Listener (API, RDS)", LISTENER, realistic_listener),
]


def best_of(repeat: int, fn: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        kept = fn()
        best = min(best, time.perf_counter() - start)
        del kept
    return best


def cached_bytes(rtype: ResourceType[Any], raws: list[bytes]) -> float:
    """Bytes the session's cache holds per resource beyond its serialized size."""
    response = discovery_pb2.DiscoveryResponse(type_url=rtype.type_url, version_info="1", nonce="n")
    for raw in raws:
        response.resources.add(type_url=rtype.type_url, value=raw)
    wire = response.SerializeToString()
    del response
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    session = Session(node=base_pb2.Node(id="bench"), resource_types=[rtype])
    session.subscribe(rtype.type_url, "*")
    session.connect(0.0)
    session.requests_to_send(0.0)
    events = session.receive(discovery_pb2.DiscoveryResponse.FromString(wire), 1.0)
    assert len(events) == len(raws), events[:1]
    del events
    session.requests_to_send(1.0)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert session.resource_states()  # keep the session alive until measured
    return (held - sum(len(raw) for raw in raws)) / len(raws)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.n
    print(f"{'type':<32} {'view us':>8} {'floor us':>9} {'ratio':>6} {'wire B':>7} {'held B':>8}")
    for label, rtype, make in CASES:
        raws = [make(i).SerializeToString() for i in range(n)]
        message_class = rtype.decode(raws[0])[1]._message_class
        view = best_of(args.repeat, lambda: [rtype.decode(raw) for raw in raws])  # noqa: B023
        floor = best_of(args.repeat, lambda: [message_class.FromString(raw) for raw in raws])  # noqa: B023
        beyond = cached_bytes(rtype, raws)
        wire = sum(len(r) for r in raws) / n
        print(
            f"{label:<32} {view / n * 1e6:>8.2f} {floor / n * 1e6:>9.2f} {view / floor:>5.2f}x "
            f"{wire:>7.0f} {beyond:>8.0f}"
        )
    print(
        "view: the type's decoder (parse, validate, build the view); floor: protobuf parse, kept."
    )
    print("held B: bytes the cache holds per resource beyond its wire bytes (tracemalloc).")


if __name__ == "__main__":
    main()
