"""CPU per request of the sans-I/O call path under Envoy's HTTP rules (`HTTP_RULES`): route,
timeout, faults, hash, header changes, one attempt and its outcome, without any I/O.

Prints one table: CPU microseconds per request (process time, the best of five runs) for
common route shapes, each behind four routes that do not match: the call path's share of a
proxyless HTTP request's CPU, before the httpx transport and the picker add theirs
(``bench/call_path.py`` is the same for gRPC calls).

    python bench/http_call_path.py [--requests 20000]
"""

from __future__ import annotations

import argparse
import random
import time
import timeit
from collections.abc import Callable
from typing import Any

from envoy.config.core.v3 import base_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.http.fault.v3 import fault_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from xdsclient._call import (
    HTTP_RULES,
    ActiveFaults,
    AttemptOutcome,
    CallConfig,
    CallPlan,
    CallRequest,
)
from xdsclient.resources import ListenerView

AUTHORITY = "reviews.default.svc"
PATH = "/api/v1/products/7?full=1"
HEADERS = (("accept", "*/*"), ("user-agent", "python-httpx/0.28"), ("x-user", "42"))


def _config(fill: Callable[[Any], None], *, fault: bool = False) -> CallConfig:
    routes = route_pb2.RouteConfiguration(name="routes")
    vhost = routes.virtual_hosts.add(name="vh", domains=[AUTHORITY])
    for i in range(4):  # a few routes that do not match first
        vhost.routes.add().match.prefix = f"/other{i}/"
        vhost.routes[-1].route.cluster = "other"
    route = vhost.routes.add()
    route.match.prefix = "/api/"
    fill(route)
    manager = hcm_pb2.HttpConnectionManager()
    manager.route_config.CopyFrom(routes)
    if fault:
        manager.http_filters.add(name="fault").typed_config.Pack(fault_pb2.HTTPFault())
    manager.http_filters.add(name="router").typed_config.Pack(router_pb2.Router())
    listener = listener_pb2.Listener(name="edge")
    listener.api_listener.api_listener.Pack(manager)
    return CallConfig.from_listener(ListenerView.from_proto(listener))


def _cluster(route: Any) -> None:
    route.route.cluster = "backend"


def _weighted(route: Any) -> None:
    for name, weight in (("a", 10), ("b", 30), ("c", 60)):
        route.route.weighted_clusters.clusters.add(name=name).weight.value = weight


def _rewrites(route: Any) -> None:
    route.route.cluster = "backend"
    route.route.prefix_rewrite = "/v2/"
    route.route.host_rewrite_literal = "backend.internal"
    option = route.request_headers_to_add.add(header=base_pb2.HeaderValue(key="x-via", value="1"))
    option.append_action = base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD


def _header_and_hash(route: Any) -> None:
    route.match.headers.add(name="x-user").string_match.exact = "42"
    route.route.cluster = "backend"
    route.route.hash_policy.add().header.header_name = "x-user"


def _retry(route: Any) -> None:
    route.route.cluster = "backend"
    route.route.retry_policy.retry_on = "5xx"
    route.route.retry_policy.num_retries.value = 2


def _cases() -> list[tuple[str, CallConfig, tuple[AttemptOutcome, ...]]]:
    ok = AttemptOutcome(http_status=200, endpoint=("10.0.0.1", 80))
    down = AttemptOutcome(http_status=503, endpoint=("10.0.0.1", 80))
    return [
        ("one cluster", _config(_cluster), (ok,)),
        ("weighted clusters", _config(_weighted), (ok,)),
        ("rewrites + header", _config(_rewrites), (ok,)),
        ("fault filter, no fault", _config(_cluster, fault=True), (ok,)),
        ("header match + hash", _config(_header_and_hash), (ok,)),
        ("one retry", _config(_retry), (down, ok)),
    ]


def _one_request(config: CallConfig, outcomes: tuple[AttemptOutcome, ...]) -> Callable[[], None]:
    rng = random.Random(1)
    faults = ActiveFaults()

    def request() -> None:
        call = CallRequest(
            authority=AUTHORITY, path=PATH, metadata=HEADERS, method="GET", grpc_rules=False
        )
        plan = CallPlan.begin(call, config, now=0.0, rng=rng, faults=faults, rules=HTTP_RULES)
        plan.start(0.0)
        for outcome in outcomes:
            step = plan.attempt_done(outcome, 0.0)
            if hasattr(step, "attempt"):
                plan.backoff_elapsed(step.at)  # type: ignore[union-attr]

    return request


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    args = parser.parse_args()
    print(f"{'route':<24} {'us/request':>10}")
    for label, config, outcomes in _cases():
        request = _one_request(config, outcomes)
        runs = timeit.repeat(request, timer=time.process_time, number=args.requests, repeat=5)
        print(f"{label:<24} {min(runs) / args.requests * 1e6:>10.2f}")


if __name__ == "__main__":
    main()
