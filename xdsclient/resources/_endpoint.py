"""ClusterLoadAssignment, validated as gRPC's xDS clients validate EDS (gRFCs A27, A61).

Rules: localities without a positive ``load_balancing_weight`` are skipped; an endpoint's weight
defaults to 1 and must not be 0; every endpoint has a socket address (additional addresses
too); an address appears once per resource; a locality appears once per priority; priorities
run from 0 with no gap; weight sums fit in 32 bits; drop overloads become parts per million;
the overprovisioning factor defaults to 140.

Two paths, one verdict: `_lean` is the hot path (no per-field path strings, locals, one loop
per level) and gives up with None at the first thing wrong; `_checked` then walks the message
again in the order of the rules and raises the error naming the field at fault. A message the
lean path accepts yields the same view `_checked` would build (the differential fuzz test in
tests/resources/test_endpoint_differential.py holds them to it). When it runs compiled (the
wheels, ``make compiled``), `_endpoint_wire` checks the common shape straight from the bytes
before either, and leaves everything else, every invalid message included, to them; the view of
a message it checked reads its localities (``priorities``) from its bytes when they are first
read, after the ACK (the verdict needs only the check).

Records are named tuples, built with ``tuple.__new__`` on the hot path (an attrs frozen class
costs a ``object.__setattr__`` per field), and localities are interned: an update of N
assignments is dominated by reading the upb message, not by building the view.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Final

import attrs
from envoy.config.endpoint.v3 import endpoint_pb2

from .._slots import slot_setters
from ._endpoint_records import (
    _HEALTH,
    _NO_METADATA,
    _PORTS,
    _UINT32_MAX,
    DropOverload,
    Endpoint,
    HealthStatus,
    LocalityEndpoints,
    _LeanFields,
    _locality,
    _new_port,
)
from ._locality import Locality
from ._view import View, invalid, is_ip_address, metadata_dict, parse

__all__ = [
    "ClusterLoadAssignmentView",
    "DropOverload",
    "Endpoint",
    "HealthStatus",
    "LocalityEndpoints",
    "decode_cluster_load_assignment",
]

_PPM_PER_UNIT = {
    0: 10_000,
    1: 100,
    2: 1,
}  # FractionalPercent denominator HUNDRED, TEN_THOUSAND, MILLION


@attrs.frozen(kw_only=True, eq=False, repr=False)
class ClusterLoadAssignmentView(View):
    """A validated ClusterLoadAssignment: localities by priority, drops, overprovisioning."""

    _message_class: ClassVar[Any] = endpoint_pb2.ClusterLoadAssignment

    name: str
    #: The localities by priority (`priorities`); None until first read when the compiled
    #: reader only checked the bytes (`_endpoint_wire.decode`), built from ``raw`` then.
    _priorities: tuple[tuple[LocalityEndpoints, ...], ...] | None = attrs.field(alias="priorities")
    drop_overloads: tuple[DropOverload, ...] = ()
    overprovisioning_factor: int = 140
    raw: bytes = attrs.field(repr=False)

    @property
    def priorities(self) -> tuple[tuple[LocalityEndpoints, ...], ...]:
        """``priorities[p]`` are the localities at priority ``p``; no gaps."""
        built = self._priorities
        if built is None:
            built = _build_priorities(self.raw)
            _set_priorities(self, built)
        return built

    def __repr__(self) -> str:
        return (
            f"ClusterLoadAssignmentView(name={self.name!r}, priorities={self.priorities!r}, "
            f"drop_overloads={self.drop_overloads!r}, "
            f"overprovisioning_factor={self.overprovisioning_factor!r})"
        )

    @property
    def localities(self) -> tuple[LocalityEndpoints, ...]:
        """Every locality, highest priority (0) first."""
        return tuple(locality for group in self.priorities for locality in group)

    def healthy_endpoints(self, priority: int | None = None) -> Iterator[Endpoint]:
        """Every endpoint gRPC balances over (health UNKNOWN or HEALTHY), flat: priority 0
        first, each locality in order, its endpoints in order; only those of ``priority`` when
        given (none for a priority the assignment lacks). `localities` keeps the grouping
        (locality weights, priorities) for a balancer that needs it."""
        groups = self.priorities if priority is None else self.priorities[priority : priority + 1]
        for group in groups:
            for locality in group:
                for endpoint in locality.endpoints:
                    if endpoint.healthy:
                        yield endpoint

    @classmethod
    def from_proto(cls, message: Any, raw: bytes | None = None) -> ClusterLoadAssignmentView:
        """Validate ``message``; raises `ResourceDecodeError` naming the field at fault."""
        fields = _lean(message)
        if fields is None:
            return cls._checked(message, raw)  # raises the error naming the field at fault
        return cls._of(
            message.cluster_name, fields, message.SerializeToString() if raw is None else raw
        )

    @classmethod
    def _of(cls, name: str, fields: _LeanFields, raw: bytes) -> ClusterLoadAssignmentView:
        """The view of fields a lean reader (upb's or the wire's) accepted, built through its
        slots (`.._slots`: once per assignment of an update, a third of ``__init__``'s cost)."""
        view: ClusterLoadAssignmentView = _object_new(cls)
        _set_name(view, name)
        _set_priorities(view, fields[0])
        _set_drops(view, fields[1])
        _set_factor(view, fields[2])
        _set_raw(view, raw)
        return view

    @classmethod
    def _checked(cls, message: Any, raw: bytes | None) -> ClusterLoadAssignmentView:
        """The rules one by one, in order: the first broken one raises, naming its field."""
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
            where = group.locality
            locality = _locality((where.region, where.zone, where.sub_zone))
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


#: ``tuple.__new__``: builds a named tuple record without its Python-level ``__new__``.
_new = tuple.__new__
_object_new = object.__new__
_set_name, _set_priorities, _set_drops, _set_factor, _set_raw = slot_setters(
    ClusterLoadAssignmentView
)


def _lean(message: Any) -> _LeanFields | None:
    """The view's fields when ``message`` is valid, None at the first thing wrong."""
    by_priority: dict[int, list[LocalityEndpoints]] = {}
    seen_localities: set[tuple[int, str, str, str]] = set()
    seen: set[tuple[str, int]] = set()
    for group in message.endpoints:
        if not group.HasField("load_balancing_weight"):
            continue
        weight = group.load_balancing_weight.value
        if weight == 0:
            continue
        if not group.HasField("locality"):
            return None
        where = group.locality
        region, zone, sub_zone = where.region, where.zone, where.sub_zone
        priority = group.priority
        key = (priority, region, zone, sub_zone)
        if key in seen_localities:
            return None
        seen_localities.add(key)
        endpoints = _lean_endpoints(group.lb_endpoints, seen)
        if endpoints is None:
            return None
        locality = _locality((region, zone, sub_zone))
        record = _new(LocalityEndpoints, (locality, weight, priority, endpoints))
        group_list = by_priority.get(priority)
        if group_list is None:
            by_priority[priority] = [record]
        else:
            group_list.append(record)
    count = len(by_priority)
    for p, groups in by_priority.items():
        if p >= count or (len(groups) > 1 and sum(g[1] for g in groups) > _UINT32_MAX):
            return None
    policy = message.policy
    drops: tuple[DropOverload, ...] = ()
    if policy.drop_overloads:
        found = _lean_drops(policy.drop_overloads)
        if found is None:
            return None
        drops = found
    factor = (
        policy.overprovisioning_factor.value if policy.HasField("overprovisioning_factor") else 140
    )
    priorities = tuple(tuple(by_priority[p]) for p in range(count))
    return priorities, drops, factor


def _lean_drops(overloads: Any) -> tuple[DropOverload, ...] | None:
    drops: list[DropOverload] = []
    for drop in overloads:
        if not drop.category:
            return None
        percent = drop.drop_percentage
        unit = _PPM_PER_UNIT.get(percent.denominator)
        if unit is None:
            return None
        ppm = min(percent.numerator * unit, 1_000_000)
        drops.append(DropOverload(drop.category, ppm))
    return tuple(drops)


def _lean_endpoints(lbs: Any, seen: set[tuple[str, int]]) -> tuple[Endpoint, ...] | None:
    """One locality's endpoints, or None at the first thing wrong. The hot loop of EDS: one
    upb access per field it needs, records built with ``tuple.__new__``."""
    endpoints: list[Endpoint] = []
    append = endpoints.append
    health = _HEALTH.get
    unknown = HealthStatus.UNKNOWN
    no_metadata = _NO_METADATA
    for lb in lbs:
        if lb.HasField("load_balancing_weight"):
            weight = lb.load_balancing_weight.value
            if weight == 0:
                return None
        else:
            weight = 1
        endpoint = lb.endpoint
        key = _lean_address(endpoint.address, seen)
        if key is None:
            return None
        extras = endpoint.additional_addresses
        additional: tuple[tuple[str, int], ...] = ()
        if extras:
            keys = [_lean_address(extra.address, seen) for extra in extras]
            if None in keys:
                return None
            additional = tuple(keys)  # type: ignore[arg-type]  # no None, checked above
        append(
            _new(
                Endpoint,
                (
                    key[0],
                    key[1],
                    additional,
                    endpoint.hostname,
                    health(lb.health_status, unknown),
                    weight,
                    metadata_dict(lb.metadata) if lb.HasField("metadata") else no_metadata,
                ),
            )
        )
    return tuple(endpoints)


def _lean_address(address: Any, seen: set[tuple[str, int]]) -> tuple[str, int] | None:
    if not address.HasField("socket_address"):
        return None
    socket = address.socket_address
    host = socket.address
    port = socket.port_value
    if port > 65535 or not is_ip_address(host):
        return None
    shared = _PORTS.get(port)
    key = (host, _new_port(port) if shared is None else shared)  # the interned port
    if key in seen:
        return None
    seen.add(key)
    return key


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
    metadata = metadata_dict(lb.metadata) if lb.HasField("metadata") else _NO_METADATA
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


#: The wire reader's `build` (bound by `_decoder`, which imports its module).
_build_fields: Callable[[bytes], tuple[str, _LeanFields] | None]


def _build_priorities(raw: bytes) -> tuple[tuple[LocalityEndpoints, ...], ...]:
    """The localities of a view the compiled reader only checked, read from its bytes by the
    same reader (which takes what its check took); upb's reading should it ever not."""
    read = _build_fields(raw)
    fields = _lean(parse(endpoint_pb2.ClusterLoadAssignment, raw)) if read is None else read[1]
    if fields is None:  # the check accepted what no reader takes: a bug, never a NACK now
        raise RuntimeError("an accepted ClusterLoadAssignment no longer reads")
    return fields[0]


def _decode_upb(data: bytes) -> tuple[str, ClusterLoadAssignmentView]:
    """bytes -> (name, view) through upb: the decoder of the pure-Python build, and of what the
    compiled wire reader leaves to upb (every invalid message among them)."""
    view = ClusterLoadAssignmentView.from_proto(
        parse(endpoint_pb2.ClusterLoadAssignment, data), data
    )
    return view.name, view  # the view's name: upb makes a new str at each read of the field


def _decoder() -> Callable[[bytes], tuple[str, ClusterLoadAssignmentView]]:
    """The compiled wire reader's `decode` when it runs compiled (`xdsclient._compiled` decides
    whether it does: not with ``XDSCLIENT_PURE=1``, nor from a build older than its source),
    else upb: interpreted, the reader is slower than upb."""
    from . import _endpoint_wire  # it reads this module's records: imported once they exist

    global _build_fields
    _build_fields = _endpoint_wire.build
    if not _endpoint_wire.COMPILED:
        return _decode_upb
    setters = slot_setters(ClusterLoadAssignmentView)
    _endpoint_wire.bind_view(ClusterLoadAssignmentView, setters, _decode_upb)
    return _endpoint_wire.decode


#: The ENDPOINT type's decoder: bytes -> (name, view). The compiled wire reader takes the
#: common shape when it is built; upb reads the rest, and decides every invalid message.
decode_cluster_load_assignment: Final = _decoder()
