"""gRPC's HTTP filter registry (gRFC A39): which filter configs a client knows, how each is
validated, and which may be overridden per route.

Why a registry: a Listener's ``http_filters`` and a RouteConfiguration's
``typed_per_filter_config`` are NACKed or accepted by what gRPC knows of each config type, not
by the filter's name. Known types validate their config (an invalid fault percentage or a
negative delay is a NACK); an unknown type is NACKed unless the filter (or its
``FilterConfig`` wrapper) is optional; a type without per-route support (the router) may not
appear in ``typed_per_filter_config``. RBAC is a server filter (gRFC A41): on a client listener
it is unknown; fault, stateful session and GCP authn are client filters, unknown on a server
listener; the router runs on both. Checked against grpcio's C-core by the differential harness.

One client filter gRPC lacks is known here: Envoy's on-demand filter (``OnDemand`` and its
``PerRouteConfig``), because this library runs it (`_on_demand`: the routes it covers resolve
their cluster at request time). grpcio NACKs a listener naming it unless the filter is optional.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envoy.extensions.filters.http.fault.v3 import fault_pb2
from envoy.extensions.filters.http.gcp_authn.v3 import gcp_authn_pb2
from envoy.extensions.filters.http.on_demand.v3 import on_demand_pb2
from envoy.extensions.filters.http.rbac.v3 import rbac_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.http.stateful_session.v3 import stateful_session_pb2

from ._view import invalid, unpack

__all__ = [
    "CLIENT_FILTERS",
    "CLIENT_ONLY_HTTP_FILTERS",
    "KNOWN_HTTP_FILTERS",
    "OVERRIDE_TYPES",
    "SERVER_ONLY_HTTP_FILTERS",
    "validate_filter_config",
    "validate_override",
]

_PREFIX = "type.googleapis.com/"
_MAX_SECONDS = 315_576_000_000  # the range google.protobuf.Duration allows


def _url(message_class: Any) -> str:
    return f"{_PREFIX}{message_class.DESCRIPTOR.full_name}"


def check_duration(name: str, path: str, duration: Any) -> float:
    """A Duration gRPC accepts: non-negative and within the type's range; in seconds."""
    if not 0 <= duration.seconds <= _MAX_SECONDS or not 0 <= duration.nanos <= 999_999_999:
        raise invalid(name, path, "must be a non-negative duration within range")
    seconds: float = duration.seconds + duration.nanos / 1e9
    return seconds


def _fault(name: str, path: str, packed: Any) -> None:
    """HTTPFault as C-core reads it (gRFC A33): it must unpack and a fixed delay must be a
    valid duration; C-core maps any abort status and clamps percentages, and so do we."""
    config = unpack(name, path, packed, fault_pb2.HTTPFault)
    if config.HasField("delay"):
        delay = config.delay
        if delay.WhichOneof("fault_delay_secifier") == "fixed_delay":
            check_duration(name, f"{path}.delay.fixed_delay", delay.fixed_delay)


def _on_demand(name: str, path: str, packed: Any) -> None:
    """OnDemand or PerRouteConfig: it must unpack and an ODCDS timeout be a valid duration."""
    message_class = (
        on_demand_pb2.OnDemand
        if packed.type_url == _url(on_demand_pb2.OnDemand)
        else on_demand_pb2.PerRouteConfig
    )
    config = unpack(name, path, packed, message_class)
    if config.odcds.HasField("timeout"):
        check_duration(name, f"{path}.odcds.timeout", config.odcds.timeout)


def _no_check(name: str, path: str, packed: Any) -> None:
    """Known and taken as it is."""


Check = Callable[[str, str, Any], None]

#: Top-level filter config types gRPC clients know, with their config check.
_CLIENT_CHECKS: dict[str, Check] = {
    _url(router_pb2.Router): _no_check,
    _url(fault_pb2.HTTPFault): _fault,
    _url(stateful_session_pb2.StatefulSession): _no_check,
    _url(gcp_authn_pb2.GcpAuthnFilterConfig): _no_check,
    _url(on_demand_pb2.OnDemand): _on_demand,
}
#: Filters gRPC runs on servers only (gRFC A41).
SERVER_ONLY_HTTP_FILTERS: frozenset[str] = frozenset({_url(rbac_pb2.RBAC)})
#: Filters gRPC runs on clients only: on a server listener they are unknown.
CLIENT_ONLY_HTTP_FILTERS: frozenset[str] = frozenset(_CLIENT_CHECKS) - {_url(router_pb2.Router)}
#: Every filter config type gRPC knows (clients and servers).
KNOWN_HTTP_FILTERS: frozenset[str] = frozenset(_CLIENT_CHECKS) | SERVER_ONLY_HTTP_FILTERS
#: The config types a client listener accepts.
CLIENT_FILTERS: frozenset[str] = frozenset(_CLIENT_CHECKS)
#: Per-route override config types, with their check (the router has none).
OVERRIDE_TYPES: dict[str, Check] = {
    _url(fault_pb2.HTTPFault): _fault,
    _url(rbac_pb2.RBACPerRoute): _no_check,
    _url(stateful_session_pb2.StatefulSessionPerRoute): _no_check,
    _url(on_demand_pb2.PerRouteConfig): _on_demand,
}


def validate_filter_config(name: str, path: str, packed: Any) -> None:
    """Check a known filter's top-level config (the caller made sure its type is known)."""
    _CLIENT_CHECKS.get(packed.type_url, _no_check)(name, path, packed)


def validate_override(name: str, path: str, packed: Any, optional: bool) -> bool:
    """Whether a ``typed_per_filter_config`` entry is kept: known override types are checked
    and kept; unknown ones are NACKed unless optional (then dropped)."""
    check = OVERRIDE_TYPES.get(packed.type_url)
    if check is None:
        if optional:
            return False
        raise invalid(name, path, f"unsupported filter config override type {packed.type_url}")
    check(name, path, packed)
    return True
