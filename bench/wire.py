"""Benchmark: decoding ClusterLoadAssignments by upb and by the wire reader, side by side.

For N assignments of the e2e benchmark's shape (one locality, 3 endpoints), per assignment:
the floor (protobuf parses it, nothing more), the upb path (parse, ``_lean``, the view), and
the wire reader building the same view, interpreted (its source) and compiled (when ``make
compiled`` has built it); compiled, also its check alone (what the ACK waits for) and the
decoder's checked view with its localities then read (the whole cost). Best of ``--repeat``.

    python bench/wire.py [--n 10000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))

import xds_config as cfg
from envoy.config.endpoint.v3 import endpoint_pb2

from xdsclient.resources import ClusterLoadAssignmentView, _endpoint_wire


def interpreted_reader() -> ModuleType:
    """The wire reader loaded from its source, whether or not a compiled build shadows it."""
    path = os.path.join(os.path.dirname(_endpoint_wire.__file__), "_endpoint_wire.py")
    spec = importlib.util.spec_from_file_location("xdsclient.resources._wire_source", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def by_wire(read: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def decode(data: bytes) -> Any:
        name, fields = read(data)
        return ClusterLoadAssignmentView._of(name, fields, data)

    return decode


def check_then_build(data: bytes) -> Any:
    """The compiled decoder's view (checked only), then its localities read, as after the ACK."""
    view = _endpoint_wire.decode(data)[1]
    assert view.priorities
    return view


def by_upb(data: bytes) -> Any:
    return ClusterLoadAssignmentView.from_proto(
        endpoint_pb2.ClusterLoadAssignment.FromString(data), data
    )


def per_item(decode: Callable[[bytes], Any], wires: list[bytes], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        kept = [decode(data) for data in wires]
        best = min(best, time.perf_counter() - start)
        del kept
    return best / len(wires)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    wires = [cfg.endpoints(i).SerializeToString() for i in range(args.n)]
    floor = per_item(endpoint_pb2.ClusterLoadAssignment.FromString, wires, args.repeat)
    rows = [
        ("floor: protobuf parse", floor),
        ("upb path (parse, _lean, view)", per_item(by_upb, wires, args.repeat)),
        (
            "wire reader, interpreted",
            per_item(by_wire(interpreted_reader().read_fields), wires, args.repeat),
        ),
    ]
    if _endpoint_wire.COMPILED:
        compiled = per_item(by_wire(_endpoint_wire.read_fields), wires, args.repeat)
        rows.append(("wire reader, compiled (mypyc)", compiled))
        check = per_item(_endpoint_wire.check, wires, args.repeat)
        rows.append(("wire check only, compiled", check))
        rows.append(("check, then build, compiled", per_item(check_then_build, wires, args.repeat)))
    print(f"{'ClusterLoadAssignment, 3 endpoints':<34} {'per item':>10} {'x floor':>8}")
    for label, seconds in rows:
        print(f"{label:<34} {seconds * 1e6:>7.2f} us {seconds / floor:>7.1f}x")
    if not _endpoint_wire.COMPILED:
        print("(no compiled row: run `make compiled` first)")


if __name__ == "__main__":
    main()
