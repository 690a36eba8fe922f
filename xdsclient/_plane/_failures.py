"""The asyncio shell of the call path every front end shares: the words of its failures.

Why apart from the front ends: a resource the configuration lacks and an assignment with no
endpoint fail a gRPC call and an HTTP request alike, and C-core's words for them (``<LDS|RDS|
CDS|EDS> resource <name>: <reason> (node ID:<id>)``) name the resource and the reason whatever
the protocol; the gRPC channel gives them as a status's details, the HTTP transport in its
response's body.
"""

from __future__ import annotations

from .. import (
    ClusterConfig,
    ResourceDoesNotExistError,
    ResourceError,
    ResourceValidationError,
    XdsError,
)

__all__ = ["empty_assignment", "resource_details"]

_KINDS = {
    "envoy.config.listener.v3.Listener": "LDS",
    "envoy.config.route.v3.RouteConfiguration": "RDS",
    "envoy.config.cluster.v3.Cluster": "CDS",
    "envoy.config.endpoint.v3.ClusterLoadAssignment": "EDS",
}


def resource_details(error: XdsError, node_id: str) -> str:
    """C-core's words for a resource the configuration lacks: ``<LDS|RDS|CDS|EDS> resource
    <name>: <reason> (node ID:<id>)``, the reason ``does not exist`` for a missing or deleted
    one, ``invalid resource: <why>`` for a NACKed one (C-core words the why its own way)."""
    if not isinstance(error, ResourceError):
        return f"{error} (node ID:{node_id})"
    kind = _KINDS.get(error.type_url.rsplit("/", 1)[-1], error.type_url)
    if isinstance(error, ResourceDoesNotExistError):
        reason = "does not exist"
    elif isinstance(error, ResourceValidationError):
        reason = f"invalid resource: {error.message}"
    else:
        reason = error.message
    return f"{kind} resource {error.name}: {reason} (node ID:{node_id})"


def empty_assignment(entry: ClusterConfig | None) -> str | None:
    """C-core's words for an assignment with no endpoint: no localities, or only empty ones
    (listed as C-core lists them); None when it has an endpoint (or is not an assignment)."""
    assignment = entry.endpoints if entry is not None else None
    if assignment is None:
        return None
    localities = [locality for group in assignment.priorities for locality in group]
    if any(locality.endpoints for locality in localities):
        return None
    if not localities:
        reason = "contains no localities"
    else:
        listed = ", ".join(
            f'{{region="{loc.locality.region}", zone="{loc.locality.zone}", '
            f'sub_zone="{loc.locality.sub_zone}"}}'
            for loc in localities
        )
        reason = f"contains empty localities: [{listed}]"
    return f"no children in weighted_target policy (EDS resource {assignment.name}: {reason})"
