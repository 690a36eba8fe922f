"""The ClusterLoadAssignment decoder as it was before the lean rewrite, kept as the
reference the differential fuzz test compares `xdsclient.resources._endpoint` against. Only
``ClusterLoadAssignmentView.from_proto`` is used; the value classes are its own copies, compared
field by field. Do not "improve" it: it is the specification by example.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
from envoy.config.endpoint.v3 import endpoint_pb2

from xdsclient._settings._config import Locality
from xdsclient.resources._view import View, invalid, is_ip_address, metadata_dict, parse

__all__ = [
    "ClusterLoadAssignmentView",
    "DropOverload",
    "Endpoint",
    "HealthStatus",
    "LocalityEndpoints",
    "decode_cluster_load_assignment",
]

_UINT32_MAX = 2**32 - 1
_PPM_PER_UNIT = {
    0: 10_000,
    1: 100,
    2: 1,
}  # FractionalPercent denominator HUNDRED, TEN_THOUSAND, MILLION


class HealthStatus(enum.IntEnum):
    """``envoy.config.core.v3.HealthStatus``."""

    UNKNOWN = 0
    HEALTHY = 1
    UNHEALTHY = 2
    DRAINING = 3
    TIMEOUT = 4
    DEGRADED = 5


_HEALTH = {status.value: status for status in HealthStatus}


@attrs.frozen(kw_only=True)
class Endpoint:
    """One backend: where it is, how healthy, how heavy."""

    address: str
    port: int
    #: Further (address, port) pairs of the same endpoint (gRFC A61, dual stack).
    additional_addresses: tuple[tuple[str, int], ...] = ()
    hostname: str = ""
    health_status: HealthStatus = HealthStatus.UNKNOWN
    weight: int = 1
    metadata: Mapping[str, Any] = attrs.field(factory=dict, eq=False, hash=False)

    @property
    def healthy(self) -> bool:
        """Usable for load balancing: gRPC takes UNKNOWN and HEALTHY."""
        return self.health_status in (HealthStatus.UNKNOWN, HealthStatus.HEALTHY)


@attrs.frozen(kw_only=True)
class LocalityEndpoints:
    """The endpoints of one locality at one priority."""

    locality: Locality
    weight: int
    priority: int
    endpoints: tuple[Endpoint, ...]


@attrs.frozen(kw_only=True)
class DropOverload:
    """Drop this category of requests with this probability (parts per million)."""

    category: str
    parts_per_million: int


@attrs.frozen(kw_only=True, eq=False)
class ClusterLoadAssignmentView(View):
    """A validated ClusterLoadAssignment: localities by priority, drops, overprovisioning."""

    _message_class: ClassVar[Any] = endpoint_pb2.ClusterLoadAssignment

    name: str
    #: ``priorities[p]`` are the localities at priority ``p``; no gaps.
    priorities: tuple[tuple[LocalityEndpoints, ...], ...]
    drop_overloads: tuple[DropOverload, ...] = ()
    overprovisioning_factor: int = 140
    raw: bytes = attrs.field(repr=False)

    @property
    def localities(self) -> tuple[LocalityEndpoints, ...]:
        """Every locality, highest priority (0) first."""
        return tuple(locality for group in self.priorities for locality in group)

    @classmethod
    def from_proto(cls, message: Any, raw: bytes | None = None) -> ClusterLoadAssignmentView:
        """Validate ``message``; raises `ResourceDecodeError` naming the field at fault."""
        name = message.cluster_name
        by_priority: dict[int, list[LocalityEndpoints]] = {}
        seen_localities: set[tuple[int, Locality]] = set()
        seen_addresses: set[tuple[str, int]] = set()
        for i, group in enumerate(message.endpoints):
            path = f"endpoints[{i}]"
            weight = (
                group.load_balancing_weight.value if group.HasField("load_balancing_weight") else 0
            )
            if weight == 0:
                continue  # gRPC skips localities without a weight
            if not group.HasField("locality"):
                raise invalid(name, f"{path}.locality", "required")
            locality = Locality(
                region=group.locality.region,
                zone=group.locality.zone,
                sub_zone=group.locality.sub_zone,
            )
            priority = group.priority
            if (priority, locality) in seen_localities:
                raise invalid(
                    name,
                    f"{path}.locality",
                    f"duplicate locality {_locality_text(locality)} at priority {priority}",
                )
            seen_localities.add((priority, locality))
            endpoints = tuple(
                _endpoint(name, f"{path}.lb_endpoints[{j}]", lb, seen_addresses)
                for j, lb in enumerate(group.lb_endpoints)
            )
            by_priority.setdefault(priority, []).append(
                LocalityEndpoints(
                    locality=locality, weight=weight, priority=priority, endpoints=endpoints
                )
            )
        for priority, groups in by_priority.items():
            if sum(g.weight for g in groups) > _UINT32_MAX:
                raise invalid(
                    name,
                    "endpoints",
                    f"locality weights at priority {priority} sum above 4294967295",
                )
        missing = [p for p in range(len(by_priority)) if p not in by_priority]
        if missing:
            raise invalid(
                name,
                "endpoints",
                f"priorities must run from 0 without gaps; missing {', '.join(map(str, missing))}",
            )
        drops = []
        policy = message.policy
        for i, drop in enumerate(policy.drop_overloads):
            if not drop.category:
                raise invalid(name, f"policy.drop_overloads[{i}].category", "must not be empty")
            percent = drop.drop_percentage
            if percent.denominator not in _PPM_PER_UNIT:
                raise invalid(
                    name,
                    f"policy.drop_overloads[{i}].drop_percentage.denominator",
                    "unknown denominator",
                )
            ppm = min(percent.numerator * _PPM_PER_UNIT[percent.denominator], 1_000_000)
            drops.append(DropOverload(category=drop.category, parts_per_million=ppm))
        factor = (
            policy.overprovisioning_factor.value
            if policy.HasField("overprovisioning_factor")
            else 140
        )
        return cls(
            name=name,
            priorities=tuple(tuple(by_priority[p]) for p in range(len(by_priority))),
            drop_overloads=tuple(drops),
            overprovisioning_factor=factor,
            raw=message.SerializeToString() if raw is None else raw,
        )


def _endpoint(name: str, path: str, lb: Any, seen: set[tuple[str, int]]) -> Endpoint:
    weight = lb.load_balancing_weight.value if lb.HasField("load_balancing_weight") else 1
    if weight == 0:
        raise invalid(name, f"{path}.load_balancing_weight", "must be greater than 0")
    endpoint = lb.endpoint
    address = _socket_address(name, f"{path}.endpoint.address", endpoint.address, seen)
    additional = tuple(
        _socket_address(
            name, f"{path}.endpoint.additional_addresses[{k}].address", extra.address, seen
        )
        for k, extra in enumerate(endpoint.additional_addresses)
    )
    metadata = metadata_dict(lb.metadata) if lb.HasField("metadata") else {}
    return Endpoint(
        address=address[0],
        port=address[1],
        additional_addresses=additional,
        hostname=endpoint.hostname,
        health_status=_HEALTH.get(lb.health_status, HealthStatus.UNKNOWN),
        weight=weight,
        metadata=metadata,
    )


def _socket_address(
    name: str, path: str, address: Any, seen: set[tuple[str, int]]
) -> tuple[str, int]:
    if not address.HasField("socket_address"):
        raise invalid(name, path, "must be a socket_address")
    socket = address.socket_address
    if not socket.address:
        raise invalid(name, f"{path}.socket_address.address", "must not be empty")
    if not is_ip_address(socket.address):
        raise invalid(
            name, f"{path}.socket_address.address", f"{socket.address!r} is not an IP address"
        )
    if socket.port_value > 65535:
        raise invalid(name, f"{path}.socket_address.port_value", "must be at most 65535")
    key = (socket.address, socket.port_value)
    if key in seen:
        raise invalid(name, path, f"duplicate address {socket.address}:{socket.port_value}")
    seen.add(key)
    return key


def _locality_text(locality: Locality) -> str:
    return "/".join((locality.region, locality.zone, locality.sub_zone))


def decode_cluster_load_assignment(data: bytes) -> tuple[str, ClusterLoadAssignmentView]:
    """The ENDPOINT type's decoder: bytes -> (name, view)."""
    message = parse(endpoint_pb2.ClusterLoadAssignment, data)
    return message.cluster_name, ClusterLoadAssignmentView.from_proto(message, data)
