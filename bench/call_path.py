"""CPU per call of the sans-I/O call path (`xdsclient._call`): route, deadline, faults, hash,
one attempt and its outcome, without any I/O.

Prints one table: CPU microseconds per call (process time, the best of five runs) for common
route shapes, each behind four routes that do not match. This is the share of a proxyless
call's CPU the call path takes, before the front end and the picker add theirs.

    python bench/call_path.py [--calls 20000]
"""

from __future__ import annotations

import argparse
import random
import time
import timeit
from collections.abc import Callable
from typing import Any

from route_shapes import cluster, config, follow, header_and_hash, retry, weighted

from xdsclient._call import ActiveFaults, AttemptOutcome, CallConfig, CallPlan, CallRequest, Code

METHOD = "/pkg.Svc/Method"
METADATA = (("x-user", "42"), ("x-trace-bin", b"\x00\x01"), ("user-agent", "bench"))


def _config(fill: Callable[[Any], None], *, fault: bool = False) -> CallConfig:
    return config("svc", "svc", "/pkg.Svc/", fill, fault=fault)


def _cases() -> list[tuple[str, CallConfig, tuple[AttemptOutcome, ...]]]:
    ok = AttemptOutcome(code=Code.OK)
    down = AttemptOutcome(code=Code.UNAVAILABLE)
    return [
        ("one cluster", _config(cluster), (ok,)),
        ("weighted clusters", _config(weighted), (ok,)),
        ("fault filter, no fault", _config(cluster, fault=True), (ok,)),
        ("header match + hash", _config(header_and_hash), (ok,)),
        ("one retry", _config(retry("unavailable")), (down, ok)),
    ]


def _one_call(call_config: CallConfig, outcomes: tuple[AttemptOutcome, ...]) -> Callable[[], None]:
    rng = random.Random(1)
    faults = ActiveFaults()

    def call() -> None:
        request = CallRequest(authority="svc", path=METHOD, metadata=METADATA, deadline=5.0)
        follow(CallPlan.begin(request, call_config, now=0.0, rng=rng, faults=faults), outcomes)

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    args = parser.parse_args()
    print(f"{'route':<24} {'us/call':>8}")
    for label, call_config, outcomes in _cases():
        call = _one_call(call_config, outcomes)
        runs = timeit.repeat(call, timer=time.process_time, number=args.calls, repeat=5)
        best = min(runs)
        print(f"{label:<24} {best / args.calls * 1e6:>8.2f}")


if __name__ == "__main__":
    main()
