"""A server (socket) Listener's filter chains, checked as gRPC C-core checks them (gRFC A36).

Why its own module: gRPC validates every filter chain in full, then builds the map it selects a
chain with, and only that map decides which chains clash. A chain gRPC can never select (one
naming server names or application protocols, a transport protocol other than ``raw_buffer``,
or a destination port) is still validated, but takes no part in the clash check; where a
destination prefix has a ``raw_buffer`` chain, the chains there without a transport protocol
are dropped. Two selectable chains clash when they share a destination prefix, a source type,
a source prefix and a source port (prefixes compared as networks: ``10.1.2.3/8`` is
``10.0.0.0/8``; a prefix length above the address's is clamped). A ``transport_socket`` must be
a ``DownstreamTlsContext`` naming an identity certificate provider instance (C-core's
``xds_listener_parser.cc``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence, Set
from typing import Any

import attrs
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from ._view import check_instance, invalid, unpack

__all__ = ["DownstreamTls", "check_clashes", "cidr", "downstream_tls"]

_SELECTABLE_TRANSPORTS = ("", "raw_buffer")


@attrs.frozen(kw_only=True)
class DownstreamTls:
    """What a server filter chain's TLS asks for (gRFC A29): certificate providers by instance
    name (resolved by the user against their bootstrap) and whether clients must present one."""

    identity_provider_instance: str
    identity_certificate_name: str = ""
    ca_provider_instance: str = ""
    ca_certificate_name: str = ""
    require_client_certificate: bool = False


def cidr(name: str, path: str, prefix: Any) -> str:
    """A CidrRange as a network ``address/length``, masked as C-core masks it."""
    try:
        address = ipaddress.ip_address(prefix.address_prefix)
    except ValueError:
        raise invalid(
            name, f"{path}.address_prefix", f"not an IP address: {prefix.address_prefix!r}"
        ) from None
    length = min(prefix.prefix_len.value, address.max_prefixlen)
    network = ipaddress.ip_network((address, length), strict=False)
    return f"{network.network_address}/{length}"


def check_clashes(name: str, chains: Sequence[Any]) -> None:
    """Raise for the first filter chain whose match clashes with an earlier one's."""
    # destination prefix -> [raw_buffer seen, {(source type, source prefix, port): chain index}]
    destinations: dict[str, tuple[list[bool], dict[tuple[int, str, int], int]]] = {}
    for i, chain in enumerate(chains):
        match = chain.filter_chain_match
        path = f"filter_chains[{i}].filter_chain_match"
        if match.destination_port.value:
            continue  # never selected
        for destination in _prefixes(name, f"{path}.prefix_ranges", match.prefix_ranges):
            raw_seen, taken = destinations.setdefault(destination, ([False], {}))
            if match.server_names or match.application_protocols:
                continue
            transport = match.transport_protocol
            if transport not in _SELECTABLE_TRANSPORTS or (raw_seen[0] and not transport):
                continue
            if transport and not raw_seen[0]:
                raw_seen[0] = True
                taken.clear()  # the chains without a transport protocol are dropped here
            sources = _prefixes(name, f"{path}.source_prefix_ranges", match.source_prefix_ranges)
            for source in sources:
                for port in match.source_ports or (0,):
                    key = (match.source_type, source, port)
                    if key in taken:
                        raise invalid(name, path, f"same match as filter_chains[{taken[key]}]")
                    taken[key] = i


def _prefixes(name: str, path: str, ranges: Any) -> list[str]:
    return [cidr(name, f"{path}[{k}]", r) for k, r in enumerate(ranges)] or [""]


def downstream_tls(
    name: str, path: str, socket: Any, providers: Set[str] | None = None
) -> DownstreamTls:
    """A filter chain's ``transport_socket`` (``path``), as C-core reads a server's TLS; with
    ``providers`` (the bootstrap's instance names) each instance it names must be one of them."""
    where = f"{path}.typed_config"
    context = unpack(name, where, socket.typed_config, tls_pb2.DownstreamTlsContext)
    common = context.common_tls_context
    validation = (
        common.combined_validation_context.default_validation_context
        if common.HasField("combined_validation_context")
        else common.validation_context
    )
    if validation.HasField("system_root_certs"):
        raise invalid(name, where, "system_root_certs is not supported on servers")
    if validation.match_subject_alt_names:
        raise invalid(name, where, "match_subject_alt_names is not supported on servers")
    identity = common.tls_certificate_provider_instance
    if not identity.instance_name:
        raise invalid(name, where, "needs a tls_certificate_provider_instance")
    ca = validation.ca_certificate_provider_instance
    if providers is not None:
        common_path = f"{where}.common_tls_context"
        identity_path = f"{common_path}.tls_certificate_provider_instance"
        check_instance(name, identity_path, identity.instance_name, providers)
        if validation.HasField("ca_certificate_provider_instance"):
            where_ca = (
                "combined_validation_context.default_validation_context"
                if common.HasField("combined_validation_context")
                else "validation_context"
            )
            ca_path = f"{common_path}.{where_ca}.ca_certificate_provider_instance"
            check_instance(name, ca_path, ca.instance_name, providers)
    require = context.require_client_certificate.value
    if require and not ca.instance_name:
        raise invalid(
            name,
            f"{where}.require_client_certificate",
            "needs a ca_certificate_provider_instance to validate client certificates",
        )
    if context.require_sni.value:
        raise invalid(name, f"{where}.require_sni", "not supported")
    if context.ocsp_staple_policy != tls_pb2.DownstreamTlsContext.LENIENT_STAPLING:
        raise invalid(name, f"{where}.ocsp_staple_policy", "must be LENIENT_STAPLING")
    return DownstreamTls(
        identity_provider_instance=identity.instance_name,
        identity_certificate_name=identity.certificate_name,
        ca_provider_instance=ca.instance_name,
        ca_certificate_name=ca.certificate_name,
        require_client_certificate=require,
    )
