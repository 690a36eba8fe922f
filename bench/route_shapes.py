"""The route shapes the call-path benchmarks time (bench/call_path.py for gRPC calls,
bench/http_call_path.py under Envoy's HTTP rules), and one call's plan followed to its end.

Why shared: both time the same shapes (one cluster, weighted clusters, a fault filter that
injects nothing, a header match with a hash policy, one retry), each behind four routes that
do not match, so their tables compare; only the names, the paths and the retry conditions
differ.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.http.fault.v3 import fault_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from xdsclient._call import AttemptOutcome, CallConfig, CallPlan, RetryAt
from xdsclient.resources import ListenerView

__all__ = ["cluster", "config", "follow", "header_and_hash", "retry", "weighted"]

Fill = Callable[[Any], None]


def config(
    listener: str, domain: str, prefix: str, fill: Fill, *, fault: bool = False
) -> CallConfig:
    """The configuration of an API ``listener`` whose virtual host for ``domain`` has four
    routes that do not match, then one for ``prefix`` that ``fill`` fills (a fault filter
    that injects nothing before the router when ``fault``)."""
    routes = route_pb2.RouteConfiguration(name="routes")
    vhost = routes.virtual_hosts.add(name="vh", domains=[domain])
    for i in range(4):  # a few routes that do not match first
        vhost.routes.add().match.prefix = f"/other{i}{prefix}"
        vhost.routes[-1].route.cluster = "other"
    route = vhost.routes.add()
    route.match.prefix = prefix
    fill(route)
    manager = hcm_pb2.HttpConnectionManager()
    manager.route_config.CopyFrom(routes)
    if fault:
        manager.http_filters.add(name="fault").typed_config.Pack(fault_pb2.HTTPFault())
    manager.http_filters.add(name="router").typed_config.Pack(router_pb2.Router())
    api = listener_pb2.Listener(name=listener)
    api.api_listener.api_listener.Pack(manager)
    return CallConfig.from_listener(ListenerView.from_proto(api))


def cluster(route: Any) -> None:
    """One cluster."""
    route.route.cluster = "backend"


def weighted(route: Any) -> None:
    """Three weighted clusters."""
    for name, weight in (("a", 10), ("b", 30), ("c", 60)):
        route.route.weighted_clusters.clusters.add(name=name).weight.value = weight


def header_and_hash(route: Any) -> None:
    """A header match, and a hash policy on that header."""
    route.match.headers.add(name="x-user").string_match.exact = "42"
    route.route.cluster = "backend"
    route.route.hash_policy.add().header.header_name = "x-user"


def retry(retry_on: str) -> Fill:
    """One cluster, retried twice on ``retry_on``."""

    def fill(route: Any) -> None:
        route.route.cluster = "backend"
        route.route.retry_policy.retry_on = retry_on
        route.route.retry_policy.num_retries.value = 2

    return fill


def follow(plan: CallPlan, outcomes: tuple[AttemptOutcome, ...]) -> None:
    """Follow ``plan`` at time 0 through attempts ending with ``outcomes`` (a backoff ends
    as it is due)."""
    plan.start(0.0)
    for outcome in outcomes:
        step = plan.attempt_done(outcome, 0.0)
        if isinstance(step, RetryAt):
            plan.backoff_elapsed(step.at)
