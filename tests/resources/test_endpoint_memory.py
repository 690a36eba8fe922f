"""What an EDS view costs in memory, counted with tracemalloc (exact, unlike RSS).

An update of every assignment keeps two generations of views alive until the next snapshot
replaces the last: the bytes of one view, and what it shares with the views before it, are
what bound the client's peak memory at N=10,000 (docs/performance.md).
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from envoy.config.endpoint.v3 import endpoint_pb2

from xdsclient.resources import _endpoint, _endpoint_wire
from xdsclient.resources._endpoint import decode_cluster_load_assignment

#: Each decoder of an assignment's bytes: the one the client uses (the compiled wire reader
#: where it is built) and upb's, which decides everything the wire reader leaves.
DECODERS: dict[str, Callable[[bytes], tuple[str, Any]]] = {
    "client": decode_cluster_load_assignment,
    "upb": _endpoint._decode_upb,
}

#: An assignment of three endpoints on one port (the shape bench/e2e.py serves), its
#: (name, view) pair and its slot in a list, at most: 932 bytes in CPython 3.11, 1,029
#: compiled and 1,077 through upb before ports were interned and upb's name read once.
BUDGET = 960


def assignment(i: int, port: int) -> bytes:
    message = endpoint_pb2.ClusterLoadAssignment(cluster_name=f"cluster-{i}")
    group = message.endpoints.add()
    group.locality.region = "local"
    group.load_balancing_weight.value = 1
    for k in range(3):
        lb = group.lb_endpoints.add()
        lb.endpoint.address.socket_address.address = f"10.{k}.{i // 250 % 250}.{i % 250 + 1}"
        lb.endpoint.address.socket_address.port_value = port
    data: bytes = message.SerializeToString()
    return data


def _ports(views: list[tuple[str, Any]]) -> list[int]:
    return [e.port for _, view in views for group in view.priorities[0] for e in group.endpoints]


@pytest.mark.parametrize("decoder", list(DECODERS))
def test_an_assignment_of_three_endpoints_costs_at_most_its_budget(decoder: str) -> None:
    """Decoding a generation of assignments allocates at most `BUDGET` bytes for each."""
    decode = DECODERS[decoder]
    n = 500
    first = [decode(assignment(i, 10_000 + i)) for i in range(n)]
    data = [assignment(i, 10_000 + (i + 1) % n) for i in range(n)]  # the next generation
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        second = [decode(raw) for raw in data]
        per_assignment = (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()
    assert per_assignment <= BUDGET
    assert len(first) == len(second) == n


@pytest.mark.parametrize("decoder", list(DECODERS))
def test_endpoints_on_one_port_share_its_int_across_assignments_and_generations(
    decoder: str,
) -> None:
    """Every endpoint on a port holds the same int object, in one view and the next."""
    decode = DECODERS[decoder]
    ports = [20_000 + i for i in range(10)]
    views = [decode(assignment(i, port)) for i, port in enumerate(ports)]
    views += [decode(assignment(i, port)) for i, port in enumerate(reversed(ports))]
    found = _ports(views)
    assert sorted(set(found)) == ports
    assert len({id(port) for port in found}) == len(ports)


def test_the_wire_reader_shares_ports_with_upb() -> None:
    """The wire reader (compiled or not) returns the interned port upb's path returned."""
    _, view = _endpoint._decode_upb(assignment(1, 31_000))
    read = _endpoint_wire.read_fields(assignment(2, 31_000))
    assert read is not None
    (group,) = read[1][0][0]
    assert all(e.port is view.priorities[0][0].endpoints[0].port for e in group.endpoints)


def test_the_decoders_still_build_equal_views() -> None:
    """Interning changes which objects a view holds, never what it says."""
    data = assignment(7, 40_000)
    name, client = decode_cluster_load_assignment(data)
    upb_name, upb = _endpoint._decode_upb(data)
    assert name == upb_name == "cluster-7"
    assert client == upb
    assert client.priorities == upb.priorities
    assert client.raw is data
