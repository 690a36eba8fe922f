"""Benchmark: the protocol core against the protobuf floor.

Pushes one SotW CDS response and one Delta CDS response of N realistic clusters through
`xdsclient.Session` (parse the wire bytes, validate, decode every Cluster, cache, emit events,
build the ACK) and compares with the floor: parsing the response and unpacking every Any into a
Cluster with protobuf alone. Prints microseconds per resource and the ratio (target: <= 2x).

The EDS rows are the update path a busy mesh repeats: a session holding N validated endpoint
assignments (bench/xds_config.py's, 3 endpoints each) receives a SotW response of all N with
every one changed, with one changed, and with none changed, to its ACK; their floor parses the
response and every ClusterLoadAssignment. The views of the previous generation are built and
held outside the timed part, as the client's last snapshot holds them until after the ACK (so
freeing them is the walk's cost, not the ACK's); compiled, the update's own views are only
checked before the ACK, and built when first read: "views read" (``all+read``) adds reading
every new view's localities after the ACK, as the watchers do.

Times are this process's CPU time (best of ``--repeat``), which other processes on a shared
machine disturb far less than wall time; the session receives and answers with the cyclic
collector paused, as the client's driver runs it (`xdsclient._runtime._gc`). Each case runs
twice: as installed (compiled where the build is: the wheels, `make compiled`) and as pure
Python (``XDSCLIENT_PURE=1``, in a second process), side by side. ``--before PATH`` runs both again
with the package of another checkout (an older commit, built the same way) in the same run.

    python bench/core.py [--sizes 10000 100000] [--repeat 3] [--before PATH]
    python bench/core.py --instructions [--sizes 1000 10000] [--before PATH]

``--instructions`` counts the EDS cases' instructions per assignment with callgrind instead
(valgrind must be installed): a measure that the machine's load does not change.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.service.discovery.v3 import discovery_pb2

sys.path.insert(0, os.path.dirname(__file__))

import xds_config as cfg

import xdsclient
from xdsclient import ProtocolOptions, ResourceChanged, ResourceType, Session
from xdsclient._runtime._gc import gc_paused
from xdsclient.resources import ENDPOINT

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


#: Whether `Session.receive` takes the response's bytes beside it, as the gRPC transport hands
#: them on (an older checkout's, run with ``--before``, does not): the EDS cases then pass them.
TAKES_RAW = "raw" in inspect.signature(Session.receive).parameters


def receive(s: Session, wire: bytes, now: float) -> list[Any]:
    """``s`` receives the SotW response ``wire`` as the client's driver hands it on: parsed, and
    with its bytes where the session takes them."""
    response = discovery_pb2.DiscoveryResponse.FromString(wire)
    return s.receive(response, now, wire) if TAKES_RAW else s.receive(response, now)


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
        with gc_paused():  # until the ACK, as the driver runs it
            events = s.receive(response_class.FromString(wire), 1.0)
            (ack,) = s.requests_to_send(1.0)
        assert len(events) == len(names), len(events)
        assert not ack.HasField("error_detail")

    run.setup = setup  # type: ignore[attr-defined]
    return run


def eds_bytes(n: int, generation: int, changed: int | None = None) -> bytes:
    """A SotW EDS response of N assignments at ``generation`` (only the first ``changed`` of
    them when given; the rest at generation 0)."""
    response = discovery_pb2.DiscoveryResponse(
        type_url=ENDPOINT.type_url, version_info=str(generation), nonce=f"n{generation}"
    )
    for i in range(n):
        g = generation if changed is None or i < changed else 0
        message = cfg.endpoints(i, generation=g)
        response.resources.add(type_url=ENDPOINT.type_url, value=message.SerializeToString())
    wire: bytes = response.SerializeToString()
    return wire


def floor_eds(wire: bytes) -> None:
    response = discovery_pb2.DiscoveryResponse.FromString(wire)
    from_string = endpoint_pb2.ClusterLoadAssignment.FromString
    KEPT[:] = [from_string(packed.value) for packed in response.resources]


def eds_run(
    n: int, update: bytes, events: int, read: bool = False, loaded: bool = True
) -> Callable[[], None]:
    """A closure that pushes ``update`` into a session holding N assignments (generation 0,
    loaded in the untimed setup), to its ACK; ``events``: the changes it must report.
    ``read``: then read every new view's localities, as the watchers do after the ACK.
    ``loaded=False``: the session holds none yet (the EDS step of a full load)."""
    names = [cfg.cluster_name(i) for i in range(n)]
    initial = eds_bytes(n, 0)
    state: dict[str, Session] = {}
    held: dict[str, list[Any]] = {}

    def setup() -> None:
        s = Session(
            node=base_pb2.Node(id="bench"),
            resource_types=[ENDPOINT],
            delta=False,
            options=ProtocolOptions(),
        )
        for name in names:
            s.subscribe(ENDPOINT.type_url, name)
        s.connect(0.0)
        s.requests_to_send(0.0)
        state["s"] = s
        if not loaded:
            return
        first = receive(s, initial, 0.5)
        s.requests_to_send(0.5)
        # The client's last snapshot holds every view of the previous generation, read by its
        # watchers, until after the next ACK: so here, and freeing them is not timed.
        held["views"] = [event.value for event in first if isinstance(event, ResourceChanged)]
        for view in held["views"]:
            assert view.priorities

    def run() -> None:
        s = state["s"]
        with gc_paused():  # until the ACK, as the driver runs it
            found = receive(s, update, 1.0)
            (ack,) = s.requests_to_send(1.0)
        if read:
            for event in found:
                assert isinstance(event, ResourceChanged)
                assert event.value.priorities
        assert len(found) == events, len(found)
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
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def measure(sizes: list[int], repeat: int) -> list[tuple[int, str, float, float]]:
    """(N, case, seconds, floor seconds) for every case at every size."""
    rows = []
    for n in sizes:
        sotw, names = sotw_bytes(n)
        delta, _ = delta_bytes(n)
        f_sotw = timeit(partial(floor_sotw, sotw), repeat)
        f_delta = timeit(partial(floor_delta, delta), repeat)
        f_unpack = timeit(partial(floor_any_unpack, sotw), repeat)
        cases = [
            ("SotW, named", core_run(sotw, names, delta=False, wildcard=False), f_sotw),
            ("SotW, wildcard", core_run(sotw, names, delta=False, wildcard=True), f_sotw),
            ("Delta, named", core_run(delta, names, delta=True, wildcard=False), f_delta),
            ("Delta, wildcard", core_run(delta, names, delta=True, wildcard=True), f_delta),
        ]
        rows.append((n, "SotW floor written with Any.Unpack", f_unpack, f_sotw))
        for label, fn, floor in cases:
            rows.append((n, label, timeit(fn, repeat), floor))
        all_new, one_new, unchanged = eds_bytes(n, 1), eds_bytes(n, 1, changed=1), eds_bytes(n, 0)
        f_eds = timeit(partial(floor_eds, all_new), repeat)
        for label, update, events, read in (
            ("EDS update all N", all_new, n, False),
            ("EDS update all N, views read", all_new, n, True),
            ("EDS update 1 of N", one_new, 1, False),
            ("EDS resend unchanged", unchanged, 0, False),
        ):
            rows.append((n, label, timeit(eds_run(n, update, events, read), repeat), f_eds))
    return rows


def other_rows(sizes: list[int], repeat: int, env: dict[str, str]) -> dict[tuple[int, str], float]:
    """The same cases in a second process with ``env`` (``XDSCLIENT_PURE=1``: every module from
    its source; ``PYTHONPATH``: another checkout's package): seconds by (N, case)."""
    command = [sys.executable, __file__, "--json", "--sizes", *map(str, sizes)]
    done = subprocess.run(
        [*command, "--repeat", str(repeat)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return {(n, label): total for n, label, total, _ in json.loads(done.stdout)}


#: The EDS cases by their short name: the update and the changes it must report.
EDS_CASES: dict[str, Callable[[int], tuple[bytes, int, bool, bool]]] = {
    "all": lambda n: (eds_bytes(n, 1), n, False, True),
    "all+read": lambda n: (eds_bytes(n, 1), n, True, True),
    "one": lambda n: (eds_bytes(n, 1, changed=1), 1, False, True),
    "none": lambda n: (eds_bytes(n, 0), 0, False, True),
    "load": lambda n: (eds_bytes(n, 0), n, False, False),
    "load+read": lambda n: (eds_bytes(n, 0), n, True, False),
}


def run_once(n: int, case: str) -> None:
    """One EDS case, the session set up (and warmed by a first run) outside ``sys.call_tracing``,
    the run inside it: what `instructions` counts."""
    run = eds_run(n, *EDS_CASES[case](n))
    setup = run.setup  # type: ignore[attr-defined]
    setup()
    run()
    setup()
    gc.collect()
    gc.disable()  # the young collection after the pause is the watchers' (it follows the ACK)
    sys.call_tracing(run, ())


def instructions(n: int, case: str, path: str | None) -> float | None:
    """Instructions per assignment of one EDS case (callgrind, counting only inside
    ``sys.call_tracing``: the machine's load does not change them), with the package at
    ``path`` (None: this one); None without valgrind."""
    if shutil.which("valgrind") is None:
        return None
    with tempfile.TemporaryDirectory() as folder:
        command = [
            "valgrind", "--tool=callgrind", "--collect-atstart=no",
            "--toggle-collect=sys_call_tracing", f"--callgrind-out-file={folder}/out",
            sys.executable, __file__, "--run-once", str(n), case,
        ]  # fmt: skip
        env = {**os.environ, **({"PYTHONPATH": os.path.abspath(path)} if path else {})}
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    counted = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    return None if counted is None else int(counted.group(1).replace(",", "")) / n


def print_instructions(sizes: list[int], before: str | None) -> None:
    print(f"{'N':>8}  {'EDS case':<12} {'instructions/assignment':>24} {'before':>10}")
    for n in sizes:
        for case in EDS_CASES:
            ours = instructions(n, case, None)
            theirs = instructions(n, case, before) if before else None
            if ours is None:
                print("no valgrind here")
                return
            then = "-" if theirs is None else f"{theirs / 1000:.1f}k"
            print(f"{n:>8}  {case:<12} {ours / 1000:>23.1f}k {then:>10}")
    print("callgrind: Session.receive of one SotW EDS response and its ACK, collector off;")
    print("all: every assignment changed; all+read: then every new view's localities read (what")
    print("the watchers do after the ACK); one: one of N; none: all N unchanged; load: the")
    print("first response of all N (a full load's EDS step), load+read: then every view read.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--before", metavar="PATH", help="also run the package of the checkout at PATH"
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count the EDS cases' instructions with callgrind instead (needs valgrind)",
    )
    parser.add_argument("--run-once", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_once:
        run_once(int(args.run_once[0]), args.run_once[1])
        return
    if args.instructions:
        print_instructions(args.sizes, args.before)
        return
    rows = measure(args.sizes, args.repeat)
    if args.json:
        print(json.dumps(rows))
        return
    columns = {"pure": other_rows(args.sizes, args.repeat, {"XDSCLIENT_PURE": "1"})}
    if args.before:
        before = {"PYTHONPATH": os.path.abspath(args.before)}
        columns["before"] = other_rows(args.sizes, args.repeat, before)
        columns["bef.pure"] = other_rows(args.sizes, args.repeat, {**before, "XDSCLIENT_PURE": "1"})
    build = "compiled" if xdsclient.compiled else "pure Python: no compiled build here"
    heads = "".join(f" {name + ' us':>11}" for name in columns)
    ratios = "".join(f" {name:>8}" for name in columns)
    print(f"{'N':>8}  {'case':<36} {'core us/res':>11}{heads} {'floor us/res':>12} {'ratio':>6}"
          f"{ratios}")  # fmt: skip
    for n, label, total, floor in rows:
        others = [column[(n, label)] for column in columns.values()]
        cells = "".join(f" {other / n * 1e6:>11.2f}" for other in others)
        shares = "".join(f" {other / floor:>7.2f}x" for other in others)
        print(f"{n:>8}  {label:<36} {total / n * 1e6:>11.2f}{cells} {floor / n * 1e6:>12.2f} "
              f"{total / floor:>5.2f}x{shares}")  # fmt: skip
    print(f"core: as installed ({build}); pure: XDSCLIENT_PURE=1, every module from its source.")
    if args.before:
        print(f"before: the package at {args.before} (as built there); bef.pure: it, pure Python.")
    print("floor: parse the response + FromString of every resource, kept (upb alone).")
    print("core: parse + Session.receive (decode, cache, events) + the ACK request; Clusters are")
    print("decoded into protobuf messages here (bench/views.py adds the validated views); EDS")
    print("rows decode validated ClusterLoadAssignment views, per resource of the response.")


if __name__ == "__main__":
    main()
