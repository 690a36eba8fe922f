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
from route_shapes import cluster, config, follow, header_and_hash, retry, weighted

from xdsclient._call import (
    HTTP_RULES,
    ActiveFaults,
    AttemptOutcome,
    CallConfig,
    CallPlan,
    CallRequest,
)

AUTHORITY = "reviews.default.svc"
PATH = "/api/v1/products/7?full=1"
HEADERS = (("accept", "*/*"), ("user-agent", "python-httpx/0.28"), ("x-user", "42"))


def _config(fill: Callable[[Any], None], *, fault: bool = False) -> CallConfig:
    return config("edge", AUTHORITY, "/api/", fill, fault=fault)


def _rewrites(route: Any) -> None:
    route.route.cluster = "backend"
    route.route.prefix_rewrite = "/v2/"
    route.route.host_rewrite_literal = "backend.internal"
    option = route.request_headers_to_add.add(header=base_pb2.HeaderValue(key="x-via", value="1"))
    option.append_action = base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD


def _cases() -> list[tuple[str, CallConfig, tuple[AttemptOutcome, ...]]]:
    ok = AttemptOutcome(http_status=200, endpoint=("10.0.0.1", 80))
    down = AttemptOutcome(http_status=503, endpoint=("10.0.0.1", 80))
    return [
        ("one cluster", _config(cluster), (ok,)),
        ("weighted clusters", _config(weighted), (ok,)),
        ("rewrites + header", _config(_rewrites), (ok,)),
        ("fault filter, no fault", _config(cluster, fault=True), (ok,)),
        ("header match + hash", _config(header_and_hash), (ok,)),
        ("one retry", _config(retry("5xx")), (down, ok)),
    ]


def _one_request(
    call_config: CallConfig, outcomes: tuple[AttemptOutcome, ...]
) -> Callable[[], None]:
    rng = random.Random(1)
    faults = ActiveFaults()

    def request() -> None:
        call = CallRequest(
            authority=AUTHORITY, path=PATH, metadata=HEADERS, method="GET", grpc_rules=False
        )
        begun = CallPlan.begin(call, call_config, now=0.0, rng=rng, faults=faults, rules=HTTP_RULES)
        follow(begun, outcomes)

    return request


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    args = parser.parse_args()
    print(f"{'route':<24} {'us/request':>10}")
    for label, call_config, outcomes in _cases():
        request = _one_request(call_config, outcomes)
        runs = timeit.repeat(request, timer=time.process_time, number=args.requests, repeat=5)
        print(f"{label:<24} {min(runs) / args.requests * 1e6:>10.2f}")


if __name__ == "__main__":
    main()
