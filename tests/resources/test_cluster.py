"""Cluster view: gRPC's CDS validation, one valid and one invalid case per rule."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.extensions.clusters.aggregate.v3 import cluster_pb2 as aggregate_pb2
from envoy.extensions.load_balancing_policies.client_side_weighted_round_robin.v3 import (
    client_side_weighted_round_robin_pb2 as wrr_pb2,
)
from envoy.extensions.load_balancing_policies.least_request.v3 import least_request_pb2
from envoy.extensions.load_balancing_policies.ring_hash.v3 import ring_hash_pb2
from envoy.extensions.load_balancing_policies.round_robin.v3 import round_robin_pb2
from envoy.extensions.load_balancing_policies.wrr_locality.v3 import wrr_locality_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2
from google.protobuf import struct_pb2

from xdsclient import ResourceDecodeError
from xdsclient.resources._cluster import (
    ClusterType,
    ClusterView,
    EnvoyOutlierRules,
    LeastRequest,
    OutlierDetection,
    RingHash,
    RoundRobin,
    UpstreamTls,
    WeightedRoundRobin,
    WrrLocality,
    decode_cluster,
)


def eds(name: str = "svc") -> Any:
    message = cluster_pb2.Cluster(name=name, type=cluster_pb2.Cluster.EDS)
    message.eds_cluster_config.eds_config.ads.SetInParent()
    return message


def view(message: Any) -> ClusterView:
    return decode_cluster(message.SerializeToString())[1]


def reason(message: Any) -> str:
    with pytest.raises(ResourceDecodeError) as caught:
        decode_cluster(message.SerializeToString())
    assert caught.value.name == message.name
    return caught.value.message


# ------------------------------------------------------------------ discovery types


def test_eds_cluster_defaults_its_service_name_to_its_own_name() -> None:
    v = view(eds())
    assert (v.name, v.type, v.eds_service_name, v.lb_policy, v.max_requests) == (
        "svc",
        ClusterType.EDS,
        "svc",
        RoundRobin(),
        1024,
    )
    message = eds()
    message.eds_cluster_config.service_name = "other"
    message.eds_cluster_config.eds_config.ClearField("ads")
    message.eds_cluster_config.eds_config.self.SetInParent()
    assert view(message).eds_service_name == "other"


def test_eds_config_must_be_ads_or_self() -> None:
    message = eds()
    message.eds_cluster_config.eds_config.path_config_source.path = "/etc/eds.yaml"
    assert reason(message) == "eds_cluster_config.eds_config: must be ads or self"


def test_xdstp_eds_clusters_need_a_service_name() -> None:
    assert reason(eds("xdstp://auth/envoy.config.cluster.v3.Cluster/c")) == (
        "eds_cluster_config.service_name: required for xdstp:// cluster names"
    )


def _dns(endpoints: int = 1, localities: int = 1, port: bool = True) -> Any:
    message = cluster_pb2.Cluster(name="dns", type=cluster_pb2.Cluster.LOGICAL_DNS)
    for _ in range(localities):
        group = message.load_assignment.endpoints.add()
        for _ in range(endpoints):
            socket = group.lb_endpoints.add().endpoint.address.socket_address
            socket.address = "backend.example.com"
            if port:
                socket.port_value = 443
    return message


def test_logical_dns_takes_its_single_host_and_port() -> None:
    v = view(_dns())
    assert (v.type, v.dns_host, v.dns_port) == (ClusterType.LOGICAL_DNS, "backend.example.com", 443)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (_dns(localities=2), "load_assignment.endpoints: LOGICAL_DNS needs exactly one locality"),
        (
            _dns(endpoints=2),
            "load_assignment.endpoints[0].lb_endpoints: LOGICAL_DNS needs exactly one endpoint",
        ),
        (
            _dns(port=False),
            "load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address"
            ".port_value: required",
        ),
    ],
)
def test_logical_dns_needs_exactly_one_endpoint_with_a_port(message: Any, expected: str) -> None:
    assert reason(message) == expected


def _aggregate(children: list[str], extension: str = "envoy.clusters.aggregate") -> Any:
    message = cluster_pb2.Cluster(name="agg")
    message.cluster_type.name = extension
    message.cluster_type.typed_config.Pack(aggregate_pb2.ClusterConfig(clusters=children))
    return message


def test_aggregate_clusters_keep_their_children_in_order() -> None:
    v = view(_aggregate(["primary", "secondary"]))
    assert (v.type, v.aggregate_children) == (ClusterType.AGGREGATE, ("primary", "secondary"))


def test_aggregate_clusters_need_children_and_the_right_extension() -> None:
    assert reason(_aggregate([])) == "cluster_type.typed_config.clusters: must not be empty"
    assert reason(_aggregate(["a"], "envoy.clusters.redis")) == (
        "cluster_type.name: unsupported cluster type 'envoy.clusters.redis'"
    )


def test_other_discovery_types_are_unsupported() -> None:
    message = cluster_pb2.Cluster(name="static", type=cluster_pb2.Cluster.STATIC)
    assert reason(message) == "type: unsupported discovery type STATIC"


# ------------------------------------------------------------------ LB policy


def test_lb_policy_enum_values() -> None:
    ring = eds()
    ring.lb_policy = cluster_pb2.Cluster.RING_HASH
    ring.ring_hash_lb_config.minimum_ring_size.value = 10
    ring.ring_hash_lb_config.maximum_ring_size.value = 100
    assert view(ring).lb_policy == RingHash(min_ring_size=10, max_ring_size=100)
    least = eds()
    least.lb_policy = cluster_pb2.Cluster.LEAST_REQUEST
    least.least_request_lb_config.choice_count.value = 3
    assert view(least).lb_policy == LeastRequest(choice_count=3)


def _lb(change: Callable[[Any], None]) -> Any:
    message = eds()
    change(message)
    return message


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda m: setattr(m, "lb_policy", cluster_pb2.Cluster.MAGLEV),
            "lb_policy: unsupported MAGLEV",
        ),
        (
            lambda m: (
                setattr(m, "lb_policy", 2),
                setattr(m.ring_hash_lb_config, "hash_function", 1),
            ),
            "ring_hash_lb_config.hash_function: must be XX_HASH",
        ),
        (
            lambda m: (
                setattr(m, "lb_policy", 2),
                m.ring_hash_lb_config.maximum_ring_size.__setattr__("value", 1 << 24),
            ),
            "ring_hash_lb_config: ring sizes must be at most 8388608",
        ),
        (
            lambda m: (
                setattr(m, "lb_policy", 2),
                m.ring_hash_lb_config.minimum_ring_size.__setattr__("value", 500),
                m.ring_hash_lb_config.maximum_ring_size.__setattr__("value", 100),
            ),
            "ring_hash_lb_config.minimum_ring_size: must not exceed maximum_ring_size",
        ),
        (
            lambda m: (
                setattr(m, "lb_policy", 1),
                m.least_request_lb_config.choice_count.__setattr__("value", 1),
            ),
            "least_request_lb_config.choice_count: must be at least 2",
        ),
    ],
)
def test_lb_policy_enum_validation(change: Callable[[Any], None], expected: str) -> None:
    assert reason(_lb(change)) == expected


def _policies(*configs: Any) -> Any:
    message = eds()
    for config in configs:
        policy = message.load_balancing_policy.policies.add()
        policy.typed_extension_config.name = "p"
        policy.typed_extension_config.typed_config.Pack(config)
    return message


def test_load_balancing_policy_takes_the_first_supported_one() -> None:
    from google.protobuf import empty_pb2

    v = view(
        _policies(empty_pb2.Empty(), least_request_pb2.LeastRequest(), round_robin_pb2.RoundRobin())
    )
    assert v.lb_policy == LeastRequest(choice_count=2)


def test_wrr_locality_wraps_its_child_and_weighted_round_robin_reads_its_periods() -> None:
    child = wrr_pb2.ClientSideWeightedRoundRobin()
    child.blackout_period.seconds = 5
    child.weight_update_period.nanos = 1_000_000  # raised to the 100 ms floor
    locality = wrr_locality_pb2.WrrLocality()
    picking = locality.endpoint_picking_policy.policies.add()
    picking.typed_extension_config.typed_config.Pack(child)
    v = view(_policies(locality))
    assert v.lb_policy == WrrLocality(
        child=WeightedRoundRobin(blackout_period=5.0, weight_update_period=0.1)
    )


def test_load_balancing_policy_validation() -> None:
    from google.protobuf import empty_pb2

    assert reason(_policies(empty_pb2.Empty())) == "load_balancing_policy: no supported policy"
    bad_ring = ring_hash_pb2.RingHash()
    bad_ring.minimum_ring_size.value = 9
    bad_ring.maximum_ring_size.value = 3
    assert reason(_policies(bad_ring)) == (
        "load_balancing_policy.policies[0].typed_extension_config.typed_config.minimum_ring_size: "
        "must not exceed maximum_ring_size"
    )
    negative = wrr_pb2.ClientSideWeightedRoundRobin()
    negative.blackout_period.seconds = -1
    assert reason(_policies(negative)) == (
        "load_balancing_policy.policies[0].typed_extension_config.typed_config.blackout_period: "
        "must not be negative"
    )


# ------------------------------------------------------------------ the rest


def test_circuit_breaker_lrs_metadata_and_telemetry_labels() -> None:
    message = eds()
    message.circuit_breakers.thresholds.add(priority=1).max_requests.value = 5  # HIGH: ignored
    message.circuit_breakers.thresholds.add(priority=0).max_requests.value = 50
    message.lrs_server.self.SetInParent()
    labels = struct_pb2.Struct()
    labels.update({"service_name": "checkout", "service_namespace": "shop", "other": 1})
    message.metadata.filter_metadata["com.google.csm.telemetry_labels"].CopyFrom(labels)
    v = view(message)
    assert v.max_requests == 50
    assert v.lrs_server_self
    assert v.telemetry_labels == {"service_name": "checkout", "service_namespace": "shop"}
    assert v.metadata["com.google.csm.telemetry_labels"]["other"] == 1


def test_lrs_server_must_be_self() -> None:
    message = eds()
    message.lrs_server.ads.SetInParent()
    assert reason(message) == "lrs_server: must be self"


def test_outlier_detection_defaults_and_ranges() -> None:
    message = eds()
    message.outlier_detection.interval.seconds = 2
    message.outlier_detection.enforcing_failure_percentage.value = 50
    v = view(message)
    assert v.outlier_detection == OutlierDetection(
        interval=2.0,
        success_rate_ejection=(1900, 100, 5, 100),
        failure_percentage_ejection=(85, 50, 5, 50),
        envoy=EnvoyOutlierRules(enforcing_failure_percentage=50),
    )
    message.outlier_detection.max_ejection_percent.value = 101
    assert reason(message) == "outlier_detection.max_ejection_percent: must be at most 100"
    message = eds()
    message.outlier_detection.base_ejection_time.seconds = -3
    assert reason(message) == "outlier_detection.base_ejection_time: must not be negative"


def test_upstream_tls_summary_and_requirements() -> None:
    context = tls_pb2.UpstreamTlsContext(sni="backend.internal")
    validation = context.common_tls_context.combined_validation_context.default_validation_context
    validation.ca_certificate_provider_instance.instance_name = "roots"
    context.common_tls_context.tls_certificate_provider_instance.instance_name = "identity"
    message = eds()
    message.transport_socket.name = "envoy.transport_sockets.tls"
    message.transport_socket.typed_config.Pack(context)
    assert view(message).upstream_tls == UpstreamTls(
        sni="backend.internal", ca_provider_instance="roots", identity_provider_instance="identity"
    )
    message.transport_socket.typed_config.Pack(tls_pb2.UpstreamTlsContext())
    assert reason(message) == (
        "transport_socket.typed_config.common_tls_context: "
        "needs a validation context (a CA certificate provider)"
    )
    message.transport_socket.typed_config.Pack(aggregate_pb2.ClusterConfig())
    assert reason(message) == "transport_socket.typed_config: must be of type UpstreamTlsContext"


def test_upstream_tls_reads_the_deprecated_provider_instance_fields_grpc_still_reads() -> None:
    """Without the current fields, ``combined_validation_context``'s
    ``validation_context_certificate_provider_instance`` names the CA provider and
    ``tls_certificate_certificate_provider_instance`` the identity, as C-core reads them."""
    context = tls_pb2.UpstreamTlsContext()
    common = context.common_tls_context
    combined = common.combined_validation_context
    combined.validation_context_certificate_provider_instance.instance_name = "roots"
    common.tls_certificate_certificate_provider_instance.instance_name = "identity"
    message = eds()
    message.transport_socket.name = "envoy.transport_sockets.tls"
    message.transport_socket.typed_config.Pack(context)
    assert view(message).upstream_tls == UpstreamTls(
        ca_provider_instance="roots", identity_provider_instance="identity"
    )


def test_views_compare_by_content_and_keep_the_protobuf() -> None:
    assert view(eds()) == view(eds())
    assert view(eds()) != view(eds("other"))
    assert view(eds()).proto == eds()


def eds_with_service(name: str, service: str) -> Any:
    message = eds(name)
    message.eds_cluster_config.service_name = service
    return message


def eds_from_self(name: str) -> Any:
    message = cluster_pb2.Cluster(name=name, type=cluster_pb2.Cluster.EDS)
    message.eds_cluster_config.eds_config.self.SetInParent()
    return message


def eds_with_ignored_fields(name: str) -> Any:
    message = eds(name)
    message.connect_timeout.seconds = 1
    message.dns_lookup_family = cluster_pb2.Cluster.V4_ONLY
    message.alt_stat_name = "stats"
    return message


@pytest.mark.parametrize(
    "message",
    [
        eds(),
        eds_with_service("svc", "assignment"),
        eds_from_self("svc"),
        eds_with_ignored_fields("svc"),
        eds_with_service("xdstp://auth/envoy.config.cluster.v3.Cluster/c", "assignment"),
    ],
)
def test_a_common_eds_cluster_decodes_as_the_full_reading_builds_it(message: Any) -> None:
    """The common EDS cluster's short path (one ListFields, slots set directly) gives the view
    the full reading and attrs' __init__ give, field for field."""
    fast = decode_cluster(message.SerializeToString())[1]
    full = ClusterView.from_proto(message)  # no raw bytes: the full reading
    assert type(fast) is ClusterView
    assert [f.name for f in attrs.fields(ClusterView)][-1] == "raw"
    for field in attrs.fields(ClusterView):
        assert getattr(fast, field.name) == getattr(full, field.name), field.name
    assert repr(fast) == repr(full)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda m: setattr(m, "lb_policy", cluster_pb2.Cluster.LEAST_REQUEST),
        lambda m: m.circuit_breakers.thresholds.add().max_requests.SetInParent(),
        lambda m: m.outlier_detection.SetInParent(),
        lambda m: m.lrs_server.self.SetInParent(),
        lambda m: m.metadata.filter_metadata["a"].SetInParent(),
    ],
)
def test_an_eds_cluster_with_more_than_the_common_fields_is_read_in_full(
    mutate: Callable[[Any], None],
) -> None:
    """A field the common path does not read sends the cluster through the full reading."""
    message = eds("svc")
    mutate(message)
    fast = decode_cluster(message.SerializeToString())[1]
    full = ClusterView.from_proto(message)
    for field in attrs.fields(ClusterView):
        assert getattr(fast, field.name) == getattr(full, field.name), field.name
