"""Listener view: API listeners (RDS or inline routes, HTTP filters) and server listeners."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from envoy.config.core.v3 import address_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.http.fault.v3 import fault_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2
from google.protobuf import duration_pb2

from xdsclient import ResourceDecodeError
from xdsclient.resources import DownstreamTls
from xdsclient.resources._listener import HttpFilter, ListenerView, decode_listener

ROUTER_URL = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
HCM = "api_listener.api_listener"


def hcm(*, rds: str | None = "routes", filters: tuple[tuple[str, Any], ...] | None = None) -> Any:
    manager = hcm_pb2.HttpConnectionManager()
    if rds is not None:
        manager.rds.route_config_name = rds
        manager.rds.config_source.ads.SetInParent()
    for name, config in filters if filters is not None else (("router", router_pb2.Router()),):
        item = manager.http_filters.add(name=name)
        if config is not None:
            item.typed_config.Pack(config)
    return manager


def api_listener(manager: Any) -> Any:
    message = listener_pb2.Listener(name="l")
    message.api_listener.api_listener.Pack(manager)
    return message


def view(message: Any) -> ListenerView:
    return decode_listener(message.SerializeToString())[1]


def reason(message: Any) -> str:
    with pytest.raises(ResourceDecodeError) as caught:
        decode_listener(message.SerializeToString())
    assert caught.value.name == "l"
    return caught.value.message


def test_an_api_listener_with_rds_filters_and_max_stream_duration() -> None:
    manager = hcm(filters=(("fault", fault_pb2.HTTPFault()), ("router", router_pb2.Router())))
    manager.common_http_protocol_options.max_stream_duration.seconds = 30
    v = view(api_listener(manager))
    assert v.api_listener is not None
    assert v.api_listener.route_config_name == "routes"
    assert v.api_listener.route_config is None
    assert [f.name for f in v.api_listener.http_filters] == ["fault", "router"]
    assert v.api_listener.http_filters[-1] == HttpFilter(
        name="router", type_url=ROUTER_URL, config=b""
    )
    assert v.api_listener.max_stream_duration == 30.0
    assert v.address is None


def test_inline_routes_are_validated_as_a_route_configuration() -> None:
    manager = hcm(rds=None)
    vhost = manager.route_config.virtual_hosts.add(name="vh", domains=["*"])
    route = vhost.routes.add()
    route.match.prefix = "/"
    route.route.cluster = "c"
    v = view(api_listener(manager))
    assert v.api_listener is not None
    assert v.api_listener.route_config is not None
    assert v.api_listener.route_config.clusters == {"c"}
    route.route.cluster = ""
    assert reason(api_listener(manager)) == (
        f"{HCM}.route_config.virtual_hosts[0].routes[0].route.cluster: must not be empty"
    )


def test_optional_unknown_filters_are_skipped() -> None:
    manager = hcm(filters=(("custom", duration_pb2.Duration()), ("router", router_pb2.Router())))
    manager.http_filters[0].is_optional = True
    v = view(api_listener(manager))
    assert v.api_listener is not None
    assert [f.name for f in v.api_listener.http_filters] == ["router"]


def _api(change: Callable[[Any], None]) -> Any:
    manager = hcm()
    change(manager)
    return api_listener(manager)


def _filters(*items: tuple[str, Any]) -> Callable[[Any], None]:
    def change(manager: Any) -> None:
        del manager.http_filters[:]
        for name, config in items:
            item = manager.http_filters.add(name=name)
            if config is not None:
                item.typed_config.Pack(config)

    return change


def _rds_from_file(manager: Any) -> None:
    manager.rds.config_source.path_config_source.path = "/routes.yaml"


def _scoped(manager: Any) -> None:
    manager.scoped_routes.name = "scoped"


ROUTER = ("router", router_pb2.Router())
FAULT = ("fault", fault_pb2.HTTPFault())
DURATION_URL = "type.googleapis.com/google.protobuf.Duration"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (_rds_from_file, f"{HCM}.rds.config_source: must be ads or self"),
        (
            lambda m: setattr(m, "xff_num_trusted_hops", 1),
            f"{HCM}.xff_num_trusted_hops: must be 0 (gRFC A41)",
        ),
        (_scoped, f"{HCM}: unsupported route specifier scoped_routes"),
        (_filters(("", router_pb2.Router())), f"{HCM}.http_filters[0].name: required"),
        (
            _filters(FAULT, FAULT, ROUTER),
            f"{HCM}.http_filters[1].name: duplicate filter name 'fault'",
        ),
        (_filters(("none", None), ROUTER), f"{HCM}.http_filters[0].typed_config: required"),
        (
            _filters(("custom", duration_pb2.Duration()), ROUTER),
            f"{HCM}.http_filters[0].typed_config: unsupported filter type {DURATION_URL}",
        ),
        (
            _filters(ROUTER, ("fault", fault_pb2.HTTPFault())),
            f"{HCM}.http_filters[0]: the router must be the last filter",
        ),
        (
            _filters(("fault", fault_pb2.HTTPFault())),
            f"{HCM}.http_filters: the last filter must be the router",
        ),
    ],
)
def test_invalid_api_listeners_name_the_field(change: Callable[[Any], None], expected: str) -> None:
    assert reason(_api(change)) == expected


def test_an_api_listener_must_hold_an_http_connection_manager() -> None:
    message = listener_pb2.Listener(name="l")
    message.api_listener.api_listener.Pack(duration_pb2.Duration())
    assert reason(message) == f"{HCM}: must be of type HttpConnectionManager"
    assert reason(listener_pb2.Listener(name="l")) == "neither an api_listener nor an address"


def server(*ports: int | None) -> Any:
    message = listener_pb2.Listener(name="l")
    message.address.socket_address.address = "0.0.0.0"
    message.address.socket_address.port_value = 8443
    for port in ports:
        chain = message.filter_chains.add(name=f"chain-{port}")
        if port is not None:
            chain.filter_chain_match.destination_port.value = port
        network = chain.filters.add(name="hcm")
        network.typed_config.Pack(hcm())
    return message


def test_a_server_listener_with_filter_chains() -> None:
    message = server(8443, None)
    range_ = message.filter_chains[0].filter_chain_match.prefix_ranges.add(
        address_prefix="10.0.0.0"
    )
    range_.prefix_len.value = 8
    skipped = message.filter_chains.add(name="tls-only")
    skipped.filter_chain_match.server_names.append("example.com")
    skipped.filters.add(name="hcm").typed_config.Pack(hcm())  # validated, never selected
    message.default_filter_chain.filters.add(name="hcm").typed_config.Pack(hcm())
    v = view(message)
    assert v.address == ("0.0.0.0", 8443)
    assert [c.name for c in v.filter_chains] == ["chain-8443", "chain-None"]
    assert v.filter_chains[0].match.destination_port == 8443
    assert v.filter_chains[0].match.prefix_ranges == ("10.0.0.0/8",)
    assert v.default_filter_chain is not None
    assert v.filter_chains[0].http_connection_manager.route_config_name == "routes"


def _pipe(message: Any) -> None:
    message.address.pipe.path = "/tmp/socket"


def _two_filters(message: Any) -> None:
    message.filter_chains[0].filters.add(name="other").typed_config.Pack(hcm())


def _no_filters(message: Any) -> None:
    del message.filter_chains[0].filters[:]


def _udp(message: Any) -> None:
    message.address.socket_address.protocol = address_pb2.SocketAddress.UDP


def _big_port(message: Any) -> None:
    message.address.socket_address.port_value = 65536


def _original_dst(message: Any) -> None:
    message.use_original_dst.value = True


def _no_chains(message: Any) -> None:
    del message.filter_chains[:]


def _bad_prefix(message: Any) -> None:
    message.filter_chains[0].filter_chain_match.prefix_ranges.add(address_prefix="ten")


def _invalid_unselectable_chain(message: Any) -> None:
    chain = message.filter_chains.add(name="sni")
    chain.filter_chain_match.server_names.append("example.com")


def _client_filter(message: Any) -> None:
    manager = hcm()
    router = manager.http_filters.pop()
    manager.http_filters.add(name="fault").typed_config.Pack(fault_pb2.HTTPFault())
    manager.http_filters.append(router)
    message.filter_chains[0].filters[0].typed_config.Pack(manager)


def _plaintext_socket(message: Any) -> None:
    message.filter_chains[0].transport_socket.typed_config.Pack(duration_pb2.Duration())


def _tls_without_identity(message: Any) -> None:
    tls = tls_pb2.DownstreamTlsContext()
    message.filter_chains[0].transport_socket.typed_config.Pack(tls)


def _tls_requiring_sni(message: Any) -> None:
    tls = tls_pb2.DownstreamTlsContext()
    tls.common_tls_context.tls_certificate_provider_instance.instance_name = "id"
    tls.require_sni.value = True
    message.filter_chains[0].transport_socket.typed_config.Pack(tls)


def _clash(message: Any) -> None:
    message.filter_chains.add().CopyFrom(message.filter_chains[0])


def _clash_after_masking(message: Any) -> None:
    first = message.filter_chains[0]
    first.filter_chain_match.prefix_ranges.add(address_prefix="10.0.0.0").prefix_len.value = 8
    second = message.filter_chains.add()
    second.CopyFrom(first)
    second.filter_chain_match.prefix_ranges[0].address_prefix = "10.9.9.9"


FC0 = "filter_chains[0]"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (_pipe, "address.socket_address: required"),
        (_udp, "address.socket_address.protocol: must be TCP"),
        (_big_port, "address.socket_address.port_value: must be at most 65535"),
        (_original_dst, "use_original_dst: not supported"),
        (_no_chains, "default_filter_chain: required when there are no filter_chains"),
        (_two_filters, f"{FC0}.filters: must hold exactly one HttpConnectionManager"),
        (_no_filters, f"{FC0}.filters: must hold exactly one HttpConnectionManager"),
        (
            _bad_prefix,
            f"{FC0}.filter_chain_match.prefix_ranges[0].address_prefix: not an IP address: 'ten'",
        ),
        (
            _invalid_unselectable_chain,
            "filter_chains[1].filters: must hold exactly one HttpConnectionManager",
        ),
        (
            _client_filter,
            f"{FC0}.filters[0].typed_config.http_filters[0].typed_config: "
            "unsupported filter type type.googleapis.com/envoy.extensions.filters.http.fault.v3"
            ".HTTPFault",
        ),
        (
            _plaintext_socket,
            f"{FC0}.transport_socket.typed_config: must be of type DownstreamTlsContext",
        ),
        (
            _tls_without_identity,
            f"{FC0}.transport_socket.typed_config: needs a tls_certificate_provider_instance",
        ),
        (_tls_requiring_sni, f"{FC0}.transport_socket.typed_config.require_sni: not supported"),
        (_clash, "filter_chains[1].filter_chain_match: same match as filter_chains[0]"),
        (
            _clash_after_masking,
            "filter_chains[1].filter_chain_match: same match as filter_chains[0]",
        ),
    ],
)
def test_invalid_socket_listeners_name_the_field(
    change: Callable[[Any], None], expected: str
) -> None:
    """A socket Listener is held to gRPC's server-listener rules, whoever receives it."""
    message = server(None)
    change(message)
    assert reason(message) == expected


def test_socket_listener_shapes_grpc_accepts() -> None:
    """Only a default chain; an empty host; chains that never clash because gRPC never selects
    one of them (destination ports, server names, a raw_buffer chain beside one without)."""
    only_default = server()
    only_default.default_filter_chain.filters.add(name="hcm").typed_config.Pack(hcm())
    assert view(only_default).default_filter_chain is not None
    no_host = server(None)
    no_host.address.socket_address.address = ""
    assert view(no_host).address == ("", 8443)
    assert len(view(server(80, 80)).filter_chains) == 2
    raw = server(None, None)
    raw.filter_chains[1].filter_chain_match.transport_protocol = "raw_buffer"
    assert len(view(raw).filter_chains) == 2
    sni = server(None, None)
    for chain in sni.filter_chains:
        chain.filter_chain_match.server_names.append("example.com")
    assert view(sni).filter_chains == ()


def test_a_filter_chain_keeps_its_downstream_tls() -> None:
    """A chain's DownstreamTlsContext is read into the view: the certificate providers named."""
    message = server(None)
    tls = tls_pb2.DownstreamTlsContext()
    tls.common_tls_context.tls_certificate_provider_instance.instance_name = "id"
    validation = tls.common_tls_context.validation_context
    validation.ca_certificate_provider_instance.instance_name = "ca"
    tls.require_client_certificate.value = True
    message.filter_chains[0].transport_socket.typed_config.Pack(tls)
    chain = view(message).filter_chains[0]
    assert chain.downstream_tls == DownstreamTls(
        identity_provider_instance="id", ca_provider_instance="ca", require_client_certificate=True
    )


def test_listener_views_compare_by_content() -> None:
    assert view(api_listener(hcm())) == view(api_listener(hcm()))
    assert view(api_listener(hcm())) != view(api_listener(hcm(rds="other")))


def _client_listener(configure: Callable[[Any], None]) -> Any:
    manager = hcm_pb2.HttpConnectionManager()
    manager.rds.route_config_name = "routes"
    manager.rds.config_source.ads.SetInParent()
    configure(manager)
    manager.http_filters.add(name="router").typed_config.Pack(router_pb2.Router())
    message = listener_pb2.Listener(name="l")
    message.api_listener.api_listener.Pack(manager)
    return message


def test_an_rbac_filter_on_a_client_listener_is_unknown_unless_optional() -> None:
    from envoy.extensions.filters.http.rbac.v3 import rbac_pb2

    def rbac(optional: bool) -> Callable[[Any], None]:
        def configure(manager: Any) -> None:
            entry = manager.http_filters.add(name="rbac", is_optional=optional)
            entry.typed_config.Pack(rbac_pb2.RBAC())

        return configure

    with pytest.raises(ResourceDecodeError, match="http_filters"):
        ListenerView.from_proto(_client_listener(rbac(False)))
    view = ListenerView.from_proto(_client_listener(rbac(True)))
    assert view.api_listener is not None


def test_a_negative_max_stream_duration_is_rejected() -> None:
    def configure(manager: Any) -> None:
        manager.common_http_protocol_options.max_stream_duration.seconds = -1

    with pytest.raises(ResourceDecodeError, match="max_stream_duration: must be a non-negative"):
        ListenerView.from_proto(_client_listener(configure))
