"""Variants for the last disagreements with C-core: socket listeners held to gRPC's
server-listener rules (gRFC A36, C-core's xds_listener_parser.cc), route actions without a
cluster specifier, and cluster specifier plugin types (C-core's xds_route_config_parser.cc).

Why its own module: each rule here was a disagreement; the variants pin both sides of it (what
C-core accepts and what it NACKs), one change each, on the base chain of `corpus.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envoy.config.core.v3 import address_pb2
from envoy.extensions.filters.http.fault.v3 import fault_pb2
from envoy.extensions.filters.http.rbac.v3 import rbac_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.http.stateful_session.v3 import stateful_session_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2
from google.protobuf import any_pb2, duration_pb2
from xds.type.v3 import typed_struct_pb2

from .corpus import LDS, RDS, Chain, Variant, _route

Change = Callable[[Chain], object]


# ------------------------------------------------------------------ socket listeners


def _server_hcm(chain: Chain, *filters: tuple[str, Any, bool]) -> Any:
    """The chain's routes through RDS, then ``filters`` (name, config, optional), the router."""
    manager = hcm_pb2.HttpConnectionManager()
    manager.rds.route_config_name = chain.routes.name
    manager.rds.config_source.ads.SetInParent()
    for name, config, optional in filters:
        manager.http_filters.add(name=name, is_optional=optional).typed_config.Pack(config)
    manager.http_filters.add(name="router").typed_config.Pack(router_pb2.Router())
    return manager


def _add_chain(chain: Chain, name: str = "fc") -> Any:
    """Add a valid filter chain to the chain's (socket) listener; returns it."""
    filter_chain = chain.listener.filter_chains.add(name=name)
    filter_chain.filters.add(name="hcm").typed_config.Pack(_server_hcm(chain))
    return filter_chain


def _socket(edit: Callable[[Chain], object] | None = None, *, chains: int = 1) -> Change:
    """The listener as a valid socket listener (address, ``chains`` filter chains), then
    ``edit``."""

    def change(chain: Chain) -> None:
        listener = chain.listener
        listener.ClearField("api_listener")
        socket = listener.address.socket_address
        socket.address, socket.port_value = "0.0.0.0", 8080
        for i in range(chains):
            _add_chain(chain, f"fc{i}")
        if edit is not None:
            edit(chain)

    return change


def _first(edit: Callable[[Any], object]) -> Callable[[Chain], object]:
    return lambda chain: edit(chain.listener.filter_chains[0])


def _match(edit: Callable[[Any], object], *which: int) -> Callable[[Chain], None]:
    """``edit`` the filter_chain_match of the listed chains (all when none are listed)."""

    def change(chain: Chain) -> None:
        chains = chain.listener.filter_chains
        for i in which or range(len(chains)):
            edit(chains[i].filter_chain_match)

    return change


def _prefix(address: str, length: int | None) -> Callable[[Any], None]:
    def edit(match: Any) -> None:
        entry = match.prefix_ranges.add(address_prefix=address)
        if length is not None:
            entry.prefix_len.value = length

    return edit


def _server_filters(*filters: tuple[str, Any, bool]) -> Callable[[Chain], None]:
    def edit(chain: Chain) -> None:
        packed = chain.listener.filter_chains[0].filters[0].typed_config
        packed.Pack(_server_hcm(chain, *filters))

    return edit


def _tls(edit: Callable[[Any], object]) -> Callable[[Chain], None]:
    def change(chain: Chain) -> None:
        context = tls_pb2.DownstreamTlsContext()
        edit(context)
        socket = chain.listener.filter_chains[0].transport_socket
        socket.name = "tls"
        socket.typed_config.Pack(context)

    return change


def _identity(context: Any) -> None:
    context.common_tls_context.tls_certificate_provider_instance.instance_name = "id"


def _default_chain(chain: Chain) -> None:
    chain.listener.default_filter_chain.filters.add(name="hcm").typed_config.Pack(
        _server_hcm(chain)
    )


def _inline_routes(chain: Chain) -> None:
    manager = _server_hcm(chain)
    manager.route_config.CopyFrom(chain.routes)
    chain.listener.filter_chains[0].filters[0].typed_config.Pack(manager)


SOCKET_LISTENER_VARIANTS = [
    Variant(LDS, "socket listener with one filter chain", _socket()),
    Variant(LDS, "socket listener without filter chains or a default", _socket(chains=0)),
    Variant(
        LDS, "socket listener with only a default filter chain", _socket(_default_chain, chains=0)
    ),
    Variant(
        LDS,
        "socket listener with filter chains and a default",
        _socket(_default_chain),
    ),
    Variant(
        LDS,
        "socket listener with an empty host",
        _socket(lambda c: setattr(c.listener.address.socket_address, "address", "")),
    ),
    Variant(
        LDS,
        "socket listener over UDP",
        _socket(
            lambda c: setattr(
                c.listener.address.socket_address, "protocol", address_pb2.SocketAddress.UDP
            )
        ),
    ),
    Variant(
        LDS,
        "socket listener port above 65535",
        _socket(lambda c: setattr(c.listener.address.socket_address, "port_value", 70000)),
    ),
    Variant(
        LDS,
        "socket listener on a pipe",
        _socket(lambda c: setattr(c.listener.address.pipe, "path", "/tmp/s")),
    ),
    Variant(
        LDS,
        "socket listener with use_original_dst",
        _socket(lambda c: setattr(c.listener.use_original_dst, "value", True)),
    ),
    Variant(
        LDS, "filter chain without filters", _socket(_first(lambda f: f.ClearField("filters")))
    ),
    Variant(
        LDS,
        "filter chain with two HttpConnectionManagers",
        _socket(_first(lambda f: f.filters.append(f.filters[0]))),
    ),
    Variant(
        LDS,
        "filter chain filter that is not an HttpConnectionManager",
        _socket(_first(lambda f: f.filters[0].typed_config.Pack(router_pb2.Router()))),
    ),
    Variant(
        LDS,
        "filter chain filter without typed_config",
        _socket(_first(lambda f: f.filters[0].ClearField("typed_config"))),
    ),
    Variant(
        LDS,
        "filter chain with server_names",
        _socket(_match(lambda m: m.server_names.append("example.com"))),
    ),
    Variant(
        LDS,
        "invalid filter chain with server_names",
        _socket(
            lambda c: (
                _match(lambda m: m.server_names.append("example.com"))(c),
                c.listener.filter_chains[0].ClearField("filters"),
            )
        ),
    ),
    Variant(
        LDS,
        "invalid filter chain with a destination port",
        _socket(
            lambda c: (
                _match(lambda m: setattr(m.destination_port, "value", 443))(c),
                c.listener.filter_chains[0].ClearField("filters"),
            )
        ),
    ),
    Variant(
        LDS,
        "filter chain prefix range that is not an IP",
        _socket(_match(_prefix("ten", 8))),
    ),
    Variant(
        LDS,
        "filter chain source prefix range that is not an IP",
        _socket(_match(lambda m: m.source_prefix_ranges.add(address_prefix="x"))),
    ),
    Variant(LDS, "filter chain prefix length above 32", _socket(_match(_prefix("10.0.0.0", 40)))),
    Variant(LDS, "two filter chains with the same match", _socket(chains=2)),
    Variant(
        LDS,
        "two filter chains with the same destination port",
        _socket(_match(lambda m: setattr(m.destination_port, "value", 443)), chains=2),
    ),
    Variant(
        LDS,
        "two filter chains with different prefixes",
        _socket(
            lambda c: (_match(_prefix("10.0.0.0", 8), 0)(c), _match(_prefix("11.0.0.0", 8), 1)(c)),
            chains=2,
        ),
    ),
    Variant(
        LDS,
        "two filter chains sharing one prefix range",
        _socket(
            lambda c: (
                _match(_prefix("10.0.0.0", 8))(c),
                _match(_prefix("11.0.0.0", 8), 1)(c),
            ),
            chains=2,
        ),
    ),
    Variant(
        LDS,
        "two filter chains whose prefixes mask to one",
        _socket(
            lambda c: (_match(_prefix("10.0.0.0", 8), 0)(c), _match(_prefix("10.9.9.9", 8), 1)(c)),
            chains=2,
        ),
    ),
    Variant(
        LDS,
        "two filter chains, one raw_buffer",
        _socket(_match(lambda m: setattr(m, "transport_protocol", "raw_buffer"), 1), chains=2),
    ),
    Variant(
        LDS,
        "two filter chains, both raw_buffer",
        _socket(_match(lambda m: setattr(m, "transport_protocol", "raw_buffer")), chains=2),
    ),
    Variant(
        LDS,
        "two filter chains with transport_protocol tls",
        _socket(_match(lambda m: setattr(m, "transport_protocol", "tls")), chains=2),
    ),
    Variant(
        LDS,
        "two filter chains with application_protocols",
        _socket(_match(lambda m: m.application_protocols.append("h2")), chains=2),
    ),
    Variant(
        LDS,
        "two filter chains with overlapping source ports",
        _socket(
            lambda c: (
                _match(lambda m: m.source_ports.extend([1, 2]), 0)(c),
                _match(lambda m: m.source_ports.extend([2, 3]), 1)(c),
            ),
            chains=2,
        ),
    ),
    Variant(
        LDS,
        "two filter chains with different source types",
        _socket(_match(lambda m: setattr(m, "source_type", 1), 1), chains=2),
    ),
    Variant(
        LDS,
        "server listener with the fault filter",
        _socket(_server_filters(("fault", fault_pb2.HTTPFault(), False))),
    ),
    Variant(
        LDS,
        "server listener with an optional fault filter",
        _socket(_server_filters(("fault", fault_pb2.HTTPFault(), True))),
    ),
    Variant(
        LDS,
        "server listener with a stateful session filter",
        _socket(_server_filters(("s", stateful_session_pb2.StatefulSession(), False))),
    ),
    Variant(
        LDS,
        "server listener with the RBAC filter",
        _socket(_server_filters(("rbac", rbac_pb2.RBAC(), False))),
    ),
    Variant(LDS, "server listener with inline routes", _socket(_inline_routes)),
    Variant(
        LDS,
        "filter chain transport socket that is not TLS",
        _socket(_first(lambda f: f.transport_socket.typed_config.Pack(duration_pb2.Duration()))),
    ),
    Variant(LDS, "downstream TLS without an identity provider", _socket(_tls(lambda t: None))),
    Variant(LDS, "downstream TLS with an identity provider instance", _socket(_tls(_identity))),
    Variant(
        LDS,
        "downstream TLS requiring SNI",
        _socket(_tls(lambda t: (_identity(t), setattr(t.require_sni, "value", True)))),
    ),
    Variant(
        LDS,
        "invalid default filter chain",
        _socket(lambda c: c.listener.default_filter_chain.SetInParent()),
    ),
]


# ------------------------------------------------------------------ route actions and plugins

_RLS = "type.googleapis.com/grpc.lookup.v1.RouteLookupClusterSpecifier"


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes | int) -> bytes:
    """One protobuf field: a varint, or length-delimited bytes."""
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _rls_config() -> bytes:
    """A RouteLookupClusterSpecifier C-core accepts, hand-encoded (no RLS protobuf here): one
    gRPC key builder for service "s", a lookup service and a cache size."""
    key_builder = _field(1, _field(1, b"s"))
    config = _field(2, key_builder) + _field(3, b"rls.example:443") + _field(7, 1000)
    return _field(1, config)


def _plugin(name: str, packed: Any | None, *, optional: bool = False) -> Change:
    """Define a cluster specifier plugin; ``packed`` is its typed_config (None: unset)."""

    def change(chain: Chain) -> None:
        plugin = chain.routes.cluster_specifier_plugins.add(is_optional=optional)
        plugin.extension.name = name
        if packed is not None:
            plugin.extension.typed_config.CopyFrom(packed)

    return change


def _any(type_url: str, value: bytes = b"") -> Any:
    return any_pb2.Any(type_url=type_url, value=value)


def _packed(message: Any) -> Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


def _uses(name: str) -> Change:
    return _route(lambda r: setattr(r.route, "cluster_specifier_plugin", name))


def _both(*changes: Change) -> Change:
    def change(chain: Chain) -> None:
        for each in changes:
            each(chain)

    return change


_RLS_PACKED = _any(_RLS, _rls_config())
_UNKNOWN = _packed(duration_pb2.Duration(seconds=1))
_UNKNOWN_STRUCT = _packed(typed_struct_pb2.TypedStruct(type_url="type.googleapis.com/x.Unknown"))


ROUTE_ACTION_VARIANTS = [
    Variant(
        RDS,
        "route action without a cluster specifier",
        _route(lambda r: r.route.ClearField("cluster")),
    ),
    Variant(
        RDS,
        "route action without a cluster specifier, invalid retry policy",
        _route(
            lambda r: (
                r.route.ClearField("cluster"),
                r.route.retry_policy.num_retries.SetInParent(),
            )
        ),
    ),
    Variant(
        RDS,
        "route action without a cluster specifier, bad hash regex",
        _route(
            lambda r: (
                r.route.ClearField("cluster"),
                setattr(r.route.hash_policy.add().header, "header_name", "h"),
                setattr(r.route.hash_policy[0].header.regex_rewrite.pattern, "regex", "("),
            )
        ),
    ),
    Variant(
        RDS,
        "route action without a cluster specifier, invalid per-filter config",
        _route(
            lambda r: (
                r.route.ClearField("cluster"),
                r.typed_per_filter_config["f"].CopyFrom(_UNKNOWN),
            )
        ),
    ),
    Variant(
        RDS,
        "cluster_header route with an invalid retry policy",
        _route(
            lambda r: (
                setattr(r.route, "cluster_header", "x-c"),
                r.route.retry_policy.num_retries.SetInParent(),
            )
        ),
    ),
    Variant(RDS, "RLS plugin used by a route", _both(_plugin("p", _RLS_PACKED), _uses("p"))),
    Variant(RDS, "RLS plugin unused", _plugin("p", _RLS_PACKED)),
    Variant(RDS, "RLS plugin with an empty config", _plugin("p", _any(_RLS))),
    Variant(
        RDS,
        "route names an empty plugin name",
        _both(_plugin("", _UNKNOWN, optional=True), _uses("")),
    ),
    Variant(RDS, "unknown plugin type used by a route", _both(_plugin("p", _UNKNOWN), _uses("p"))),
    Variant(RDS, "unknown plugin type unused", _plugin("p", _UNKNOWN)),
    Variant(
        RDS,
        "optional unknown plugin type used by a route",
        _both(_plugin("p", _UNKNOWN, optional=True), _uses("p")),
    ),
    Variant(RDS, "optional unknown plugin type unused", _plugin("p", _UNKNOWN, optional=True)),
    Variant(
        RDS,
        "optional unknown plugin with an empty name",
        _plugin("", _UNKNOWN, optional=True),
    ),
    Variant(
        RDS,
        "optional unknown TypedStruct plugin used by a route",
        _both(_plugin("p", _UNKNOWN_STRUCT, optional=True), _uses("p")),
    ),
    Variant(RDS, "unknown TypedStruct plugin", _plugin("p", _UNKNOWN_STRUCT)),
    Variant(
        RDS,
        "RLS plugin in a TypedStruct",
        _plugin("p", _packed(typed_struct_pb2.TypedStruct(type_url=_RLS))),
    ),
    Variant(
        RDS,
        "plugin without an extension",
        lambda c: c.routes.cluster_specifier_plugins.add(),
    ),
    Variant(RDS, "plugin without a typed_config", _plugin("p", None, optional=True)),
    Variant(
        RDS,
        "plugin type URL without a slash",
        _plugin("p", _any("x.Unknown"), optional=True),
    ),
    Variant(
        RDS,
        "two plugins with one name",
        _both(_plugin("p", _UNKNOWN, optional=True), _plugin("p", _UNKNOWN, optional=True)),
    ),
    Variant(
        RDS,
        "route names an optional unknown plugin beside a good route",
        _both(
            _plugin("p", _UNKNOWN, optional=True),
            lambda c: (
                c.routes.virtual_hosts[0].routes.add().CopyFrom(c.routes.virtual_hosts[0].routes[0])
            ),
            _uses("p"),
        ),
    ),
]

VARIANTS = SOCKET_LISTENER_VARIANTS + ROUTE_ACTION_VARIANTS
