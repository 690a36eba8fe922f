"""What ``xdsclient watch TYPE NAME`` prints for a resource: a few readable lines in text, the
resource itself as proto3 JSON with ``--json``.

Why a summary and not the whole message: an operator watching a cluster wants to see at a glance
what a data-plane client will do with it (EDS from where, which balancer, which children), not
forty lines of defaults; ``--json`` gives the whole resource, exactly as the server sent it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["resource_json", "summary"]


def resource_json(value: Any) -> dict[str, Any] | None:
    """The resource as proto3 JSON (``MessageToDict``), or None for a value with no message."""
    from google.protobuf import json_format

    proto = getattr(value, "proto", None)
    if proto is None:
        return None
    result: dict[str, Any] = json_format.MessageToDict(proto)
    return result


def summary(value: Any) -> list[str]:
    """A few lines saying what a data-plane client gets from the resource (none for a type
    the CLI does not know)."""
    from ..resources import (
        ClusterLoadAssignmentView,
        ClusterView,
        ListenerView,
        RouteConfigurationView,
    )

    if isinstance(value, ListenerView):
        return _listener(value)
    if isinstance(value, RouteConfigurationView):
        return _routes(value)
    if isinstance(value, ClusterView):
        return [_cluster(value)]
    if isinstance(value, ClusterLoadAssignmentView):
        return _endpoints(value)
    return []


def _listener(view: Any) -> list[str]:
    manager = view.api_listener
    if manager is None:
        where = f" on {view.address[0]}:{view.address[1]}" if view.address else ""
        return [f"server listener{where}, {len(view.filter_chains)} filter chains"]
    filters = ", ".join(f.name for f in manager.http_filters) or "none"
    if manager.route_config is not None:
        return [f"inline routes, filters: {filters}", *_routes(manager.route_config)]
    return [f"routes from {manager.route_config_name!r}, filters: {filters}"]


def _routes(view: Any) -> list[str]:
    lines = []
    for host in view.virtual_hosts:
        lines.append(f"virtual host {host.name!r} for {', '.join(host.domains)}")
        for route in host.routes:
            match = f"{route.match.path_match.value} {route.match.path!r}"
            lines.append(f"  {match} -> {_target(route)}")
    return lines or ["no virtual hosts"]


def _target(route: Any) -> str:
    action = route.action
    if action is None:
        return str(route.action_type.value).replace("_", "-")
    if action.weighted_clusters:
        return ", ".join(f"{c.name} ({c.weight})" for c in action.weighted_clusters)
    if action.cluster_specifier_plugin:
        return f"plugin {action.cluster_specifier_plugin}"
    return str(action.cluster)


def _cluster(view: Any) -> str:
    from ..resources import ClusterType

    if view.type is ClusterType.AGGREGATE:
        kind = f"aggregate of {' > '.join(view.aggregate_children)}"
    elif view.type is ClusterType.LOGICAL_DNS:
        kind = f"logical DNS {view.dns_host}:{view.dns_port}"
    else:
        kind = f"EDS from {view.eds_service_name!r}"
    extras = [type(view.lb_policy).__name__, f"max {view.max_requests} requests"]
    if view.outlier_detection is not None:
        extras.append("outlier detection")
    if view.upstream_tls is not None:
        extras.append("TLS")
    return f"{kind}, {', '.join(extras)}"


def _endpoints(view: Any) -> list[str]:
    lines = []
    for priority, localities in enumerate(view.priorities):
        for group in localities:
            where = "/".join(p for p in _locality(group.locality) if p) or "no locality"
            endpoints = [
                f"{e.address}:{e.port}"
                + ("" if e.healthy else f" ({e.health_status.name.lower()})")
                for e in group.endpoints
            ]
            lines.append(
                f"priority {priority}, {where} (weight {group.weight}): {', '.join(endpoints)}"
            )
    return lines or ["no endpoints"]


def _endpoint(endpoint: Any) -> str:
    health = "" if endpoint.healthy else f" ({endpoint.health_status.name.lower()})"
    return f"{endpoint.address}:{endpoint.port}{health}"


def _locality(locality: Any) -> tuple[str, str, str]:
    return (locality.region, locality.zone, locality.sub_zone)
