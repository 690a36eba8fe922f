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

from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.http.fault.v3 import fault_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from xdsclient._call import ActiveFaults, AttemptOutcome, CallConfig, CallPlan, CallRequest, Code
from xdsclient.resources import ListenerView

METHOD = "/pkg.Svc/Method"
METADATA = (("x-user", "42"), ("x-trace-bin", b"\x00\x01"), ("user-agent", "bench"))


def _config(fill: Callable[[Any], None], *, fault: bool = False) -> CallConfig:
    routes = route_pb2.RouteConfiguration(name="routes")
    vhost = routes.virtual_hosts.add(name="vh", domains=["svc"])
    for i in range(4):  # a few routes that do not match first
        vhost.routes.add().match.prefix = f"/other{i}.Svc/"
        vhost.routes[-1].route.cluster = "other"
    route = vhost.routes.add()
    route.match.prefix = "/pkg.Svc/"
    fill(route)
    manager = hcm_pb2.HttpConnectionManager()
    manager.route_config.CopyFrom(routes)
    if fault:
        manager.http_filters.add(name="fault").typed_config.Pack(fault_pb2.HTTPFault())
    manager.http_filters.add(name="router").typed_config.Pack(router_pb2.Router())
    listener = listener_pb2.Listener(name="svc")
    listener.api_listener.api_listener.Pack(manager)
    return CallConfig.from_listener(ListenerView.from_proto(listener))


def _cluster(route: Any) -> None:
    route.route.cluster = "backend"


def _weighted(route: Any) -> None:
    for name, weight in (("a", 10), ("b", 30), ("c", 60)):
        route.route.weighted_clusters.clusters.add(name=name).weight.value = weight


def _header_and_hash(route: Any) -> None:
    route.match.headers.add(name="x-user").string_match.exact = "42"
    route.route.cluster = "backend"
    route.route.hash_policy.add().header.header_name = "x-user"


def _retry(route: Any) -> None:
    route.route.cluster = "backend"
    route.route.retry_policy.retry_on = "unavailable"
    route.route.retry_policy.num_retries.value = 2


def _cases() -> list[tuple[str, CallConfig, tuple[AttemptOutcome, ...]]]:
    ok = AttemptOutcome(code=Code.OK)
    down = AttemptOutcome(code=Code.UNAVAILABLE)
    return [
        ("one cluster", _config(_cluster), (ok,)),
        ("weighted clusters", _config(_weighted), (ok,)),
        ("fault filter, no fault", _config(_cluster, fault=True), (ok,)),
        ("header match + hash", _config(_header_and_hash), (ok,)),
        ("one retry", _config(_retry), (down, ok)),
    ]


def _one_call(config: CallConfig, outcomes: tuple[AttemptOutcome, ...]) -> Callable[[], None]:
    rng = random.Random(1)
    faults = ActiveFaults()

    def call() -> None:
        request = CallRequest(authority="svc", path=METHOD, metadata=METADATA, deadline=5.0)
        plan = CallPlan.begin(request, config, now=0.0, rng=rng, faults=faults)
        plan.start(0.0)
        for outcome in outcomes:
            step = plan.attempt_done(outcome, 0.0)
            if hasattr(step, "attempt"):
                plan.backoff_elapsed(step.at)  # type: ignore[union-attr]

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    args = parser.parse_args()
    print(f"{'route':<24} {'us/call':>8}")
    for label, config, outcomes in _cases():
        call = _one_call(config, outcomes)
        runs = timeit.repeat(call, timer=time.process_time, number=args.calls, repeat=5)
        best = min(runs)
        print(f"{label:<24} {best / args.calls * 1e6:>8.2f}")


if __name__ == "__main__":
    main()
