"""Listener, validated as gRPC's xDS clients validate LDS (gRFCs A27, A36, A39).

Two shapes: a client's API listener (an HttpConnectionManager reaching its routes through RDS or
inline), and a socket (server) listener, validated by gRPC's server-listener rules whoever
receives it, as C-core does (gRFC A36): a TCP socket address with a port up to 65535, no
``use_original_dst``, filter chains (or else a ``default_filter_chain``) each holding exactly
one HttpConnectionManager whose filters are supported on servers.

Rules: the HttpConnectionManager's routes come from RDS (config source ``ads`` or ``self``, a
route name) or inline; scoped routes are unsupported. HTTP filters have unique names and a
typed config; a filter type we do not know fails the resource unless the filter is optional;
the router is present, last, and only last. Every server filter chain is validated; those gRPC
never selects (server names, application protocols, a transport protocol other than
``raw_buffer``) are left out of the view, and clashing matches are an error (`_filter_chains`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Set
from typing import Any, ClassVar

import attrs
from envoy.config.core.v3 import address_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from ._filter_chains import DownstreamTls, check_clashes, cidr, downstream_tls
from ._filters import (
    CLIENT_ONLY_HTTP_FILTERS,
    KNOWN_HTTP_FILTERS,
    SERVER_ONLY_HTTP_FILTERS,
    check_duration,
    validate_filter_config,
)
from ._route import RouteConfigurationView, route_fields
from ._type import ResourceType
from ._view import View, invalid, parse, unpack

__all__ = [
    "KNOWN_HTTP_FILTERS",
    "DownstreamTls",
    "FilterChain",
    "FilterChainMatch",
    "HttpConnectionManager",
    "HttpFilter",
    "ListenerView",
    "decode_listener",
    "listener_type",
]

_ROUTER = router_pb2.Router.DESCRIPTOR.full_name


@attrs.frozen(kw_only=True)
class HttpFilter:
    """One HTTP filter: its name, config type and serialized config."""

    name: str
    type_url: str
    config: bytes = attrs.field(repr=False)
    optional: bool = False


@attrs.frozen(kw_only=True)
class HttpConnectionManager:
    """Where the routes come from and which filters run."""

    #: RDS: the RouteConfiguration to watch (empty when the routes are inline)
    route_config_name: str = ""
    #: inline routes (an unnamed view over the inline RouteConfiguration)
    route_config: RouteConfigurationView | None = None
    http_filters: tuple[HttpFilter, ...] = ()
    #: common_http_protocol_options.max_stream_duration, in seconds
    max_stream_duration: float | None = None


@attrs.frozen(kw_only=True)
class FilterChainMatch:
    """When a server listener's filter chain applies: destination port and prefixes, source
    type, prefixes and ports (prefixes as ``address/length``)."""

    destination_port: int | None = None
    prefix_ranges: tuple[str, ...] = ()
    source_type: int = 0
    source_prefix_ranges: tuple[str, ...] = ()
    source_ports: tuple[int, ...] = ()
    server_names: tuple[str, ...] = ()
    transport_protocol: str = ""
    application_protocols: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class FilterChain:
    """A server listener's filter chain: when it applies and the HTTP connection manager it runs."""

    name: str
    match: FilterChainMatch
    http_connection_manager: HttpConnectionManager
    #: the chain's TLS (a DownstreamTlsContext), None for plaintext
    downstream_tls: DownstreamTls | None = None


@attrs.frozen(kw_only=True, eq=False)
class ListenerView(View):
    """A validated Listener: a client API listener, or a server listener with filter chains."""

    _message_class: ClassVar[Any] = listener_pb2.Listener

    name: str
    #: client side: the API listener's HttpConnectionManager
    api_listener: HttpConnectionManager | None = None
    #: server side: where it listens
    address: tuple[str, int] | None = None
    #: server side: the chains gRPC can select (all were validated; see `_selectable`)
    filter_chains: tuple[FilterChain, ...] = ()
    default_filter_chain: FilterChain | None = None
    raw: bytes = attrs.field(repr=False)

    @classmethod
    def from_proto(
        cls,
        message: Any,
        raw: bytes | None = None,
        *,
        known_filters: Collection[str] = KNOWN_HTTP_FILTERS,
        certificate_providers: Set[str] | None = None,
    ) -> ListenerView:
        """Validate ``message``; raises `ResourceDecodeError` naming the field at fault.

        ``certificate_providers``: the instance names of the bootstrap's
        ``certificate_providers``; a server chain's TLS naming another instance is rejected,
        as gRPC does (None: names are not checked)."""
        name = message.name
        fields: dict[str, Any] = {}
        if message.HasField("api_listener"):
            packed = message.api_listener.api_listener
            client_filters = [f for f in known_filters if f not in SERVER_ONLY_HTTP_FILTERS]
            fields["api_listener"] = _hcm(name, "api_listener.api_listener", packed, client_filters)
        elif message.HasField("address"):
            fields.update(_server_fields(name, message, known_filters, certificate_providers))
        else:
            raise invalid(name, "", "neither an api_listener nor an address")
        return cls(name=name, raw=message.SerializeToString() if raw is None else raw, **fields)


def _hcm(
    name: str, path: str, packed: Any, known_filters: Collection[str]
) -> HttpConnectionManager:
    hcm = unpack(name, path, packed, hcm_pb2.HttpConnectionManager)
    fields: dict[str, Any] = {}
    kind = hcm.WhichOneof("route_specifier")
    if kind == "rds":
        if hcm.rds.config_source.WhichOneof("config_source_specifier") not in ("ads", "self"):
            raise invalid(name, f"{path}.rds.config_source", "must be ads or self")
        fields["route_config_name"] = hcm.rds.route_config_name
    elif kind == "route_config":
        inline = hcm.route_config
        fields["route_config"] = RouteConfigurationView(
            name=inline.name,
            raw=inline.SerializeToString(),
            **route_fields(name, f"{path}.route_config.", inline),
        )
    else:
        raise invalid(name, path, f"unsupported route specifier {kind or '(none)'}")
    fields["http_filters"] = _http_filters(
        name, f"{path}.http_filters", hcm.http_filters, known_filters
    )
    if hcm.xff_num_trusted_hops:
        raise invalid(name, f"{path}.xff_num_trusted_hops", "must be 0 (gRFC A41)")
    if hcm.original_ip_detection_extensions:
        raise invalid(name, f"{path}.original_ip_detection_extensions", "must be empty (gRFC A41)")
    options = hcm.common_http_protocol_options
    if options.HasField("max_stream_duration"):
        where = f"{path}.common_http_protocol_options.max_stream_duration"
        fields["max_stream_duration"] = check_duration(name, where, options.max_stream_duration)
    return HttpConnectionManager(**fields)


def _http_filters(
    name: str, path: str, filters: Any, known: Collection[str]
) -> tuple[HttpFilter, ...]:
    result = []
    names: set[str] = set()
    for i, item in enumerate(filters):
        where = f"{path}[{i}]"
        if not item.name:
            raise invalid(name, f"{where}.name", "required")
        if item.name in names:
            raise invalid(name, f"{where}.name", f"duplicate filter name {item.name!r}")
        names.add(item.name)
        if item.disabled:
            continue
        if not item.HasField("typed_config"):
            if item.is_optional:
                continue
            raise invalid(name, f"{where}.typed_config", "required")
        type_url = item.typed_config.type_url
        if type_url.rsplit("/", 1)[-1] == "udpa.type.v1.TypedStruct" or type_url not in known:
            if item.is_optional:
                continue
            raise invalid(name, f"{where}.typed_config", f"unsupported filter type {type_url}")
        validate_filter_config(name, f"{where}.typed_config", item.typed_config)
        is_router = type_url.rsplit("/", 1)[-1] == _ROUTER
        if is_router and i != len(filters) - 1:
            raise invalid(name, where, "the router must be the last filter")
        result.append(
            HttpFilter(
                name=item.name,
                type_url=type_url,
                config=item.typed_config.value,
                optional=item.is_optional,
            )
        )
    if not result or result[-1].type_url.rsplit("/", 1)[-1] != _ROUTER:
        raise invalid(name, path, "the last filter must be the router")
    return tuple(result)


def _server_fields(
    name: str, message: Any, known_filters: Collection[str], providers: Set[str] | None
) -> dict[str, Any]:
    """A socket Listener's fields, by gRPC's server rules (gRFC A36, `_filter_chains`)."""
    if not message.address.HasField("socket_address"):
        raise invalid(name, "address.socket_address", "required")
    socket = message.address.socket_address
    if socket.protocol != address_pb2.SocketAddress.TCP:
        raise invalid(name, "address.socket_address.protocol", "must be TCP")
    if socket.port_value > 65535:
        raise invalid(name, "address.socket_address.port_value", "must be at most 65535")
    if message.use_original_dst.value:
        raise invalid(name, "use_original_dst", "not supported")
    server_filters = [f for f in known_filters if f not in CLIENT_ONLY_HTTP_FILTERS]
    chains = [
        _filter_chain(name, f"filter_chains[{i}]", chain, server_filters, providers)
        for i, chain in enumerate(message.filter_chains)
    ]
    check_clashes(name, message.filter_chains)
    default = None
    if message.HasField("default_filter_chain"):
        default = _filter_chain(
            name, "default_filter_chain", message.default_filter_chain, server_filters, providers
        )
    elif not chains:
        raise invalid(name, "default_filter_chain", "required when there are no filter_chains")
    return {
        "address": (socket.address, socket.port_value),
        "filter_chains": tuple(chain for chain in chains if _selectable(chain.match)),
        "default_filter_chain": default,
    }


def _selectable(match: FilterChainMatch) -> bool:
    """Whether gRPC can ever select a chain with this match (the view keeps only those)."""
    return (
        not match.server_names
        and not match.application_protocols
        and (match.transport_protocol in ("", "raw_buffer"))
    )


def _filter_chain(
    name: str,
    path: str,
    chain: Any,
    known_filters: Collection[str],
    providers: Set[str] | None = None,
) -> FilterChain:
    match = chain.filter_chain_match
    where = f"{path}.filter_chain_match"
    for k, prefix in enumerate(match.prefix_ranges):
        cidr(name, f"{where}.prefix_ranges[{k}]", prefix)
    for k, prefix in enumerate(match.source_prefix_ranges):
        cidr(name, f"{where}.source_prefix_ranges[{k}]", prefix)
    if len(chain.filters) != 1:
        raise invalid(name, f"{path}.filters", "must hold exactly one HttpConnectionManager")
    packed = chain.filters[0].typed_config
    if not chain.filters[0].HasField("typed_config"):
        raise invalid(name, f"{path}.filters[0].typed_config", "required")
    manager = _hcm(name, f"{path}.filters[0].typed_config", packed, known_filters)
    tls = None
    if chain.HasField("transport_socket"):
        tls = downstream_tls(name, f"{path}.transport_socket", chain.transport_socket, providers)
    return FilterChain(
        name=chain.name,
        match=FilterChainMatch(
            destination_port=match.destination_port.value
            if match.HasField("destination_port")
            else None,
            prefix_ranges=tuple(
                f"{r.address_prefix}/{r.prefix_len.value}" for r in match.prefix_ranges
            ),
            source_type=match.source_type,
            source_prefix_ranges=tuple(
                f"{r.address_prefix}/{r.prefix_len.value}" for r in match.source_prefix_ranges
            ),
            source_ports=tuple(match.source_ports),
            server_names=tuple(match.server_names),
            transport_protocol=match.transport_protocol,
            application_protocols=tuple(match.application_protocols),
        ),
        http_connection_manager=manager,
        downstream_tls=tls,
    )


def decode_listener(data: bytes) -> tuple[str, ListenerView]:
    """The LISTENER type's decoder: bytes -> (name, view)."""
    message = parse(listener_pb2.Listener, data)
    return message.name, ListenerView.from_proto(message, data)


_LISTENER_URL = "type.googleapis.com/" + listener_pb2.Listener.DESCRIPTOR.full_name


def listener_type(certificate_providers: Iterable[str]) -> ResourceType[ListenerView]:
    """The LISTENER type as a client whose bootstrap defines ``certificate_providers`` (their
    instance names) decodes it: a server Listener whose chain's TLS names another instance is
    NACKed (gRFC A29, as gRPC does), naming the field and the instance. `XdsClient` decodes
    listeners with the type of its own bootstrap; it equals `LISTENER`."""
    names = frozenset(certificate_providers)

    def decode(data: bytes) -> tuple[str, ListenerView]:
        message = parse(listener_pb2.Listener, data)
        return message.name, ListenerView.from_proto(message, data, certificate_providers=names)

    return ResourceType(type_url=_LISTENER_URL, decode=decode, all_resources_required_in_sotw=True)
