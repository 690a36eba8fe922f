"""The xDS resources the `XdsTransport` tests serve: a listener ``edge`` over RDS, clusters over
backends (`xdsclient.testing.HttpBackend`), and route configurations built route by route."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from envoy.config.route.v3 import route_components_pb2, route_pb2

from tests.call.builders import listener
from xdsclient.testing import builders


class Served(Protocol):
    """A backend: what a cluster needs of it."""

    @property
    def port(self) -> int: ...


LISTENER = "edge"
ROUTES = "edge-routes"


def cluster_of(
    name: str, backends: Sequence[Served], *, lrs: bool = False, lb_policy: str = "round_robin"
) -> list[Any]:
    """A round-robin EDS cluster ``name`` over ``backends`` (one locality, zone ``z-<name>``)
    and its assignment; ``lrs``: it reports load to the control plane."""
    cluster = builders.cluster(name, lb_policy=lb_policy)
    if lrs:
        cluster.lrs_server.self.SetInParent()
    spec = builders.LocalitySpec(
        endpoints=[("127.0.0.1", backend.port) for backend in backends], zone=f"z-{name}"
    )
    return [cluster, builders.cluster_load_assignment(name, [spec])]


def route_config(*vhosts: Any, name: str = ROUTES) -> Any:
    """A RouteConfiguration of ``vhosts`` (VirtualHost messages)."""
    return route_pb2.RouteConfiguration(name=name, virtual_hosts=list(vhosts))


def vhost(name: str, domains: Sequence[str], *routes: Any) -> Any:
    """A VirtualHost for ``domains`` with ``routes`` in order."""
    return route_components_pb2.VirtualHost(name=name, domains=list(domains), routes=list(routes))


def to(cluster: str, prefix: str = "/") -> Any:
    """A route sending paths under ``prefix`` to ``cluster``."""
    route = route_components_pb2.Route()
    route.match.prefix = prefix
    route.route.cluster = cluster
    return route


def resources(routes: Any, *clusters: list[Any], faults: Sequence[Any] = ()) -> list[Any]:
    """Listener `LISTENER` over ``routes`` (with HTTP fault filters ``faults`` before the
    router), with the clusters (each `cluster_of`'s list)."""
    found: list[Any] = [listener(name=LISTENER, rds=routes.name, faults=tuple(faults)), routes]
    for cluster in clusters:
        found += cluster
    return found


def ejecting(backends: Sequence[Served], *, lrs: bool = False) -> list[Any]:
    """Cluster ``c`` over ``backends`` behind listener and routes, ejecting an endpoint at its
    first 5xx (or anything outlier detection counts as one) for a minute; reporting load with
    ``lrs``."""
    cluster, assignment = cluster_of("c", backends, lrs=lrs)
    detection = cluster.outlier_detection
    detection.consecutive_5xx.value = 1
    detection.max_ejection_percent.value = 100
    detection.interval.FromSeconds(60)
    detection.base_ejection_time.FromSeconds(60)
    return resources(route_config(vhost("v", ["*"], to("c"))), [cluster, assignment])
