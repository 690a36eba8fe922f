"""The records of an EDS view (endpoints, localities, drops) and the shape both readers build.

Why apart from the view (`_endpoint`): the decoder there and the optional compiled wire reader
(`_endpoint_wire`) both build these records, and the decoder imports the reader; with the
records below both, neither imports the other back.

Records are named tuples, built with ``tuple.__new__`` on the hot path (an attrs frozen class
costs a ``object.__setattr__`` per field), and localities and ports are interned: a mesh has
few distinct ports, and one int object per port instead of one per endpoint is 28 bytes less
per endpoint (a tenth of an assignment of three endpoints), shared with the previous
generation of views while an update replaces it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from ._locality import Locality

__all__ = ["DropOverload", "Endpoint", "HealthStatus", "LocalityEndpoints"]

_UINT32_MAX = 2**32 - 1


class HealthStatus(enum.IntEnum):
    """``envoy.config.core.v3.HealthStatus``."""

    UNKNOWN = 0
    HEALTHY = 1
    UNHEALTHY = 2
    DRAINING = 3
    TIMEOUT = 4
    DEGRADED = 5


_HEALTH = {status.value: status for status in HealthStatus}

#: The metadata of every decoded endpoint without any: one shared read-only mapping instead of
#: an empty dict per endpoint (one GC-tracked object fewer per endpoint).
_NO_METADATA: Mapping[str, Any] = MappingProxyType({})


class Endpoint(NamedTuple):
    """One backend: where it is, how healthy, how heavy.

    A named tuple: built at C speed on the hot path, immutable, fields by name. Equality and
    hashing leave ``metadata`` out (it may hold dicts), as they compare what a balancer uses.
    """

    address: str
    port: int
    #: Further (address, port) pairs of the same endpoint (gRFC A61, dual stack).
    additional_addresses: tuple[tuple[str, int], ...] = ()
    hostname: str = ""
    health_status: HealthStatus = HealthStatus.UNKNOWN
    weight: int = 1
    metadata: Mapping[str, Any] = _NO_METADATA

    @property
    def healthy(self) -> bool:
        """Usable for load balancing: gRPC takes UNKNOWN and HEALTHY."""
        return self.health_status in (HealthStatus.UNKNOWN, HealthStatus.HEALTHY)

    def __eq__(self, other: object) -> bool:
        if type(other) is not Endpoint:
            return NotImplemented
        return self[:6] == other[:6]

    def __ne__(self, other: object) -> bool:
        if type(other) is not Endpoint:
            return NotImplemented
        return self[:6] != other[:6]

    def __hash__(self) -> int:
        return hash(self[:6])


class LocalityEndpoints(NamedTuple):
    """The endpoints of one locality at one priority."""

    locality: Locality
    weight: int
    priority: int
    endpoints: tuple[Endpoint, ...]


class DropOverload(NamedTuple):
    """Drop this category of requests with this probability (parts per million)."""

    category: str
    parts_per_million: int


#: Interned localities: one `Locality` per distinct (region, zone, sub_zone), shared by every
#: assignment naming it (fewer objects per view, no attrs hashing on the hot path). Bounded:
#: cleared when a server names implausibly many distinct localities.
_LOCALITIES: dict[tuple[str, str, str], Locality] = {}
_MAX_INTERNED_LOCALITIES = 10_000


def _locality(key: tuple[str, str, str]) -> Locality:
    locality = _LOCALITIES.get(key)
    if locality is None:
        if len(_LOCALITIES) >= _MAX_INTERNED_LOCALITIES:
            _LOCALITIES.clear()
        locality = _LOCALITIES[key] = Locality(region=key[0], zone=key[1], sub_zone=key[2])
    return locality


#: Interned ports: one int object per distinct port (above 256: Python caches those below),
#: shared by every endpoint on it, in this generation of views and the next. Bounded: cleared
#: when a server names implausibly many distinct ports.
_PORTS: dict[int, Any] = {}
_MAX_INTERNED_PORTS = 16_384


def _new_port(port: int) -> Any:
    """Intern ``port``, which `_PORTS` lacks (both readers look it up first, inline); the
    object interned (typed Any: compiled callers keep that object, not a new box of it)."""
    if len(_PORTS) >= _MAX_INTERNED_PORTS:
        _PORTS.clear()
    _PORTS[port] = port
    return port


#: What a reader returns: localities by priority, drops, and the overprovisioning factor.
_LeanFields = tuple[tuple[tuple[LocalityEndpoints, ...], ...], tuple[DropOverload, ...], int]
