"""The common EDS cluster read straight from its wire bytes: the compiled build's CDS decoder.

Why: a full load decodes every cluster once, and nearly every cluster a control plane sends has
one shape: EDS over ADS (or self), a service name, perhaps a connect timeout, nothing else gRPC
reads. Through upb that is a parse, a dozen accessor calls and a view built slot by slot from
Python, about 3 us a cluster; compiled with mypyc (the wheels, ``make compiled``), this module
checks those few fields on the bytes and builds the view from C, with no Python call per
cluster. Interpreted it is no faster than upb, so the decoder uses it only when it is compiled
(`COMPILED`).

It takes only that shape: a name, ``type`` EDS, ``eds_cluster_config`` whose ``eds_config`` is
``ads`` (empty) or ``self`` (perhaps with its API version) and perhaps a
``resource_api_version``, a ``service_name``, a ``connect_timeout`` (a Duration, which gRPC
ignores) and ``lb_policy`` ROUND_ROBIN given as its zero. At anything else (another field, a
field given twice, an unexpected wire type, an ``xdstp:`` name without a service name, invalid
UTF-8, bytes that do not parse) it returns None, raising nothing (a declined cluster costs about
0.1 us), and upb and the full reader decide, so it never changes a verdict or a NACK's text:
tests/resources/test_cluster_wire.py holds what it accepts to the full reader's view on
generated, mutated and byte-edited clusters, interpreted and compiled.

The view's module lends the view class, its slot setters and the values of the common view with
`bind_view`, and `decode` is handed the upb decoder (it imports this module, not the other way
round): a compiled module cannot define the attrs classes itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # compiled, positions and bytes are native 64-bit integers; plain int as Python
    from mypy_extensions import i64

from .._wire import span, text, varint

__all__ = ["COMPILED", "bind_view", "decode", "read"]

#: Whether this module runs compiled (mypyc), not from its source file.
COMPILED: Final = not __file__.endswith(".py")

_EDS: Final = 3  # envoy.config.cluster.v3.Cluster.DiscoveryType.EDS
_object_new: Final = object.__new__


class _Lent:
    """What `bind_view` lent: the view class, its 15 slot setters in field order, and the
    values every common view shares (its type, policy and empty mapping). An object's fields,
    not module globals: compiled, reading them is no dict lookup."""

    def __init__(self) -> None:
        self.view: Any = None
        self.setters: tuple[Any, ...] = ()
        self.eds: Any = None
        self.round_robin: Any = None
        self.no_mapping: Any = None


_LENT: Final = _Lent()


# Every reader below takes the message's bytes and the bounds of the part it reads. None of them
# raises at what it leaves to upb: it returns a position of -1 (`NO`; the primitives of `_wire` do
# the same) or None, as compiled a raised exception costs more than reading a whole common cluster
# (a traceback entry per frame).


def _varints(data: bytes, pos: i64, end: i64, allowed: i64) -> bool:
    """Whether the message is varint fields only, of field numbers 1 to 15 in ``allowed`` (a
    bit set), each at most once (a Duration, a SelfConfigSource)."""
    seen: i64 = 0
    while pos < end:
        key: i64 = data[pos]
        bit: i64 = 1 << (key >> 3)
        if key >= 0x80 or key & 7 != 0 or not (allowed & bit) or seen & bit:
            return False
        seen |= bit
        _, pos = varint(data, pos + 1, end)
        if pos < 0:
            return False
    return True


def _config_source(data: bytes, pos: i64, end: i64) -> bool:
    """Whether it is ``ads`` (empty) or ``self``, perhaps with ``resource_api_version``."""
    found = False
    version = False
    while pos < end:
        key: i64 = data[pos]
        if key == 0x1A or key == 0x2A:  # ads (3), self (5): length-delimited
            start, pos = span(data, pos + 1, end)
            if start < 0 or found:
                return False
            found = True
            if key == 0x1A and start != pos:
                return False  # an AggregatedConfigSource has no fields
            if not _varints(data, start, pos, 1 << 1):  # transport_api_version
                return False
        elif key == 0x30 and not version:  # resource_api_version (6): varint
            version = True
            _, pos = varint(data, pos + 1, end)
            if pos < 0:
                return False
        else:
            return False
    return found


def _eds_config(data: bytes, pos: i64, end: i64) -> str | None:
    """An ``eds_cluster_config``'s service name once its ``eds_config`` checked; None when
    it is not the common one."""
    service: str | None = None
    source = False
    while pos < end:
        key: i64 = data[pos]
        if key != 0x0A and key != 0x12:  # eds_config (1), service_name (2)
            return None
        start, pos = span(data, pos + 1, end)
        if start < 0:
            return None
        if key == 0x0A and not source:
            source = True
            if not _config_source(data, start, pos):
                return None
        elif key == 0x12 and service is None:
            service = text(data, start, pos)
            if service is None:
                return None
        else:
            return None
    if not source:
        return None
    return "" if service is None else service


def _cluster(data: bytes, end: i64) -> tuple[str, str] | None:
    """(name, service name) of the common EDS cluster; None for anything else."""
    name: str | None = ""
    service: str | None = None
    seen: i64 = 0
    pos: i64 = 0
    while pos < end:
        key: i64 = data[pos]
        bit: i64 = 1 << (key >> 3)
        if key >= 0x80 or seen & bit:
            return None  # a field numbered 16 or more, or one given twice
        seen |= bit
        if key == 0x10 or key == 0x30:  # type (2), lb_policy (6): varints
            value, pos = varint(data, pos + 1, end)
            if pos < 0 or value != (_EDS if key == 0x10 else 0):
                return None
            continue
        if key & 7 != 2:
            return None
        start, pos = span(data, pos + 1, end)
        if start < 0:
            return None
        if key == 0x0A:  # name (1)
            name = text(data, start, pos)
        elif key == 0x1A:  # eds_cluster_config (3)
            service = _eds_config(data, start, pos)
        elif key == 0x22:  # connect_timeout (4): a Duration's seconds and nanos
            if not _varints(data, start, pos, 1 << 1 | 1 << 2):
                return None
        else:
            return None
        if name is None or (key == 0x1A and service is None):
            return None
    if service is None or not seen & (1 << 2) or name is None:
        return None  # not EDS (an unset type is STATIC), or no eds_cluster_config
    if not service and name.startswith("xdstp:"):
        return None  # the full reader rejects it
    return name, service


def read(data: bytes) -> tuple[str, str] | None:
    """(name, service name as given) of a common EDS cluster, or None: upb decides."""
    return _cluster(data, len(data))


def bind_view(
    view: type,
    setters: tuple[Any, ...],
    common: tuple[Any, Any, Any],
) -> None:
    """Lend `decode` the view class, its 15 slot setters (in field order) and what every
    common view shares: (its EDS type, its round-robin policy, its empty mapping)."""
    if len(setters) != 15:
        raise ValueError(f"{view.__name__} has {len(setters)} fields, the reader sets 15")
    _LENT.view, _LENT.setters = view, setters
    _LENT.eds, _LENT.round_robin, _LENT.no_mapping = common


def decode(fallback: Callable[[bytes], tuple[str, Any]], data: bytes) -> tuple[str, Any]:
    """The CLUSTER decoder of the compiled build: bytes -> (name, view), the common cluster's
    view built here through its slots; ``fallback`` (upb and the full reader) for the rest."""
    read = _cluster(data, len(data))
    if read is None:
        return fallback(data)
    name, service = read
    return name, _view(name, service, data)


def _view(name: str, service: str, data: bytes) -> Any:
    """`ClusterView(name=name, type=EDS, eds_service_name=service or name,
    lrs_service_name=service, raw=data)`, through its slots."""
    lent = _LENT
    (
        set_name,
        set_type,
        set_eds_service_name,
        set_lrs_service_name,
        set_dns_host,
        set_dns_port,
        set_aggregate_children,
        set_lb_policy,
        set_max_requests,
        set_outlier_detection,
        set_lrs_server_self,
        set_upstream_tls,
        set_metadata,
        set_telemetry_labels,
        set_raw,
    ) = lent.setters
    view = _object_new(lent.view)
    set_name(view, name)
    set_type(view, lent.eds)
    set_eds_service_name(view, service or name)
    set_lrs_service_name(view, service)
    set_dns_host(view, "")
    set_dns_port(view, 0)
    set_aggregate_children(view, ())
    set_lb_policy(view, lent.round_robin)
    set_max_requests(view, 1024)
    set_outlier_detection(view, None)
    set_lrs_server_self(view, False)
    set_upstream_tls(view, None)
    set_metadata(view, lent.no_mapping)
    set_telemetry_labels(view, lent.no_mapping)
    set_raw(view, data)
    return view
