"""Cluster TLS against the bootstrap's certificate provider instances (gRFC A29, C-core's
decode context): with the instance names given, a TLS context naming another one is rejected
naming the field and the instance; without them, the names are kept unchecked."""

from __future__ import annotations

from typing import Any

import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from xdsclient import ResourceDecodeError
from xdsclient.resources import CLUSTER, ClusterView, UpstreamTls, cluster_type
from xdsclient.resources._cluster import decode_cluster

_COMMON = "transport_socket.typed_config.common_tls_context"
_UNKNOWN = "unrecognized certificate provider instance name: nope"


def _tls_cluster(edit: Any, name: str = "c") -> Any:
    message = cluster_pb2.Cluster(name=name, type=cluster_pb2.Cluster.EDS)
    message.eds_cluster_config.eds_config.ads.SetInParent()
    context = tls_pb2.UpstreamTlsContext()
    edit(context.common_tls_context)
    message.transport_socket.name = "envoy.transport_sockets.tls"
    message.transport_socket.typed_config.Pack(context)
    return message


def _ca(common: Any, name: str = "roots") -> None:
    common.validation_context.ca_certificate_provider_instance.instance_name = name


def _reason(message: Any, providers: frozenset[str]) -> str:
    with pytest.raises(ResourceDecodeError) as caught:
        cluster_type(providers).decode(message.SerializeToString())
    assert caught.value.name == message.name
    return caught.value.message


def test_an_unknown_ca_instance_is_rejected_naming_the_field_and_the_instance() -> None:
    """Each field that can name the CA instance (current, combined, deprecated) is checked,
    and the error names that field's ``instance_name`` and the instance, in C-core's words."""

    def combined(common: Any) -> None:
        default = common.combined_validation_context.default_validation_context
        default.ca_certificate_provider_instance.instance_name = "nope"

    def deprecated(common: Any) -> None:
        combined = common.combined_validation_context
        combined.validation_context_certificate_provider_instance.instance_name = "nope"

    providers = frozenset({"roots", "identity"})
    assert _reason(_tls_cluster(lambda c: _ca(c, "nope")), providers) == (
        f"{_COMMON}.validation_context.ca_certificate_provider_instance.instance_name: {_UNKNOWN}"
    )
    assert _reason(_tls_cluster(combined), providers) == (
        f"{_COMMON}.combined_validation_context.default_validation_context."
        f"ca_certificate_provider_instance.instance_name: {_UNKNOWN}"
    )
    assert _reason(_tls_cluster(deprecated), providers) == (
        f"{_COMMON}.combined_validation_context.validation_context_certificate_provider_instance"
        f".instance_name: {_UNKNOWN}"
    )


def test_an_unknown_identity_instance_is_rejected_in_either_field() -> None:
    """The identity instance is checked too, in the current field and the deprecated one."""

    def current(common: Any) -> None:
        _ca(common)
        common.tls_certificate_provider_instance.instance_name = "nope"

    def deprecated(common: Any) -> None:
        _ca(common)
        common.tls_certificate_certificate_provider_instance.instance_name = "nope"

    providers = frozenset({"roots"})
    assert _reason(_tls_cluster(current), providers) == (
        f"{_COMMON}.tls_certificate_provider_instance.instance_name: {_UNKNOWN}"
    )
    assert _reason(_tls_cluster(deprecated), providers) == (
        f"{_COMMON}.tls_certificate_certificate_provider_instance.instance_name: {_UNKNOWN}"
    )


def test_known_instances_and_system_roots_are_accepted() -> None:
    """Instances the bootstrap defines decode to the same view as without the check, and
    ``system_root_certs`` names no instance."""

    def mtls(common: Any) -> None:
        _ca(common)
        common.tls_certificate_provider_instance.instance_name = "identity"

    message = _tls_cluster(mtls)
    data = message.SerializeToString()
    _, checked = cluster_type({"roots", "identity"}).decode(data)
    assert checked == decode_cluster(data)[1]
    assert checked.upstream_tls == UpstreamTls(
        ca_provider_instance="roots", identity_provider_instance="identity"
    )
    system = _tls_cluster(lambda c: c.validation_context.system_root_certs.SetInParent())
    assert cluster_type(()).decode(system.SerializeToString())[1].upstream_tls == UpstreamTls(
        use_system_root_certs=True
    )


def test_a_bootstrap_without_providers_rejects_any_named_instance() -> None:
    """No ``certificate_providers`` in the bootstrap: every named instance is unknown, as in
    C-core; a cluster without a transport socket is unaffected."""
    assert _reason(_tls_cluster(lambda c: _ca(c, "nope")), frozenset()).endswith(_UNKNOWN)
    plain = cluster_pb2.Cluster(name="p", type=cluster_pb2.Cluster.EDS)
    plain.eds_cluster_config.eds_config.ads.SetInParent()
    assert cluster_type(()).decode(plain.SerializeToString())[0] == "p"


def test_a_decode_without_a_bootstrap_keeps_instance_names_unchecked() -> None:
    """`CLUSTER`, `decode_cluster` and `ClusterView.from_proto` without
    ``certificate_providers`` accept any instance name and keep it in the view."""
    message = _tls_cluster(lambda c: _ca(c, "nope"))
    data = message.SerializeToString()
    assert CLUSTER.decode(data)[1].upstream_tls == UpstreamTls(ca_provider_instance="nope")
    assert ClusterView.from_proto(message).upstream_tls == UpstreamTls(ca_provider_instance="nope")
    with pytest.raises(ResourceDecodeError):
        ClusterView.from_proto(message, certificate_providers=frozenset({"roots"}))


def test_the_bound_type_is_the_cluster_type() -> None:
    """`cluster_type` equals `CLUSTER` (same URL, full state in SotW), so watches of `CLUSTER`
    are served by it."""
    assert cluster_type(["roots"]) == CLUSTER
    assert cluster_type(["roots"]).all_resources_required_in_sotw
