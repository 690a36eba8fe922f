"""The Cluster decoder gives the verdicts of the reference one.

The reference (tests/resources/reference_cluster.py) is the decoder as it was before the lean
changes. For generated clusters built to reach every rule (discovery types, LB policies old and
new, circuit breakers, outlier detection, LRS, TLS, metadata with telemetry labels) and for
random mutations of them, both must accept with field-for-field equal views, or both reject
with the same name and message.
"""

from __future__ import annotations

from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.extensions.load_balancing_policies.ring_hash.v3 import ring_hash_pb2
from envoy.extensions.load_balancing_policies.round_robin.v3 import round_robin_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2
from hypothesis import given
from hypothesis import strategies as st

from tests.builders import cluster
from tests.resources import reference_cluster
from tests.resources.differential import FUZZ_SETTINGS, verdict
from tests.resources.test_mutations import _aggregate, _mutate, _ring_hash_policy
from xdsclient.resources import ClusterView


def assert_same_verdict(message: Any) -> None:
    assert verdict(ClusterView, message) == verdict(reference_cluster.ClusterView, message)


def _rich() -> Any:
    """An EDS cluster with every optional part the view reads."""
    message = cluster("rich")
    message.eds_cluster_config.service_name = "rich-eds"
    threshold = message.circuit_breakers.thresholds.add()
    threshold.max_requests.value = 77
    message.outlier_detection.interval.seconds = 3
    message.outlier_detection.max_ejection_percent.value = 50
    message.lrs_server.self.SetInParent()
    tls = tls_pb2.UpstreamTlsContext()
    validation = tls.common_tls_context.validation_context
    validation.ca_certificate_provider_instance.instance_name = "default"
    message.transport_socket.name = "envoy.transport_sockets.tls"
    message.transport_socket.typed_config.Pack(tls)
    labels = message.metadata.filter_metadata["com.google.csm.telemetry_labels"]
    labels.fields["service_name"].string_value = "svc"
    labels.fields["other"].string_value = "x"
    message.metadata.filter_metadata["istio"].fields["port"].number_value = 8080
    return message


def _policies() -> Any:
    message = cluster("policies")
    for payload in (ring_hash_pb2.RingHash(), round_robin_pb2.RoundRobin()):
        policy = message.load_balancing_policy.policies.add()
        policy.typed_extension_config.typed_config.Pack(payload)
    return message


def _logical_dns() -> Any:
    message = cluster_pb2.Cluster(name="dns", type=cluster_pb2.Cluster.LOGICAL_DNS)
    lb = message.load_assignment.endpoints.add().lb_endpoints.add()
    lb.endpoint.address.socket_address.address = "dns.example.com"
    lb.endpoint.address.socket_address.port_value = 443
    return message


SEEDS = [cluster("c"), _rich(), _policies(), _logical_dns(), _aggregate(), _ring_hash_policy()]


@FUZZ_SETTINGS
@given(seed=st.sampled_from(SEEDS), data=st.data())
def test_mutated_clusters_get_the_reference_verdict(seed: Any, data: st.DataObject) -> None:
    message = cluster_pb2.Cluster()
    message.CopyFrom(seed)
    for _ in range(data.draw(st.integers(1, 4))):
        _mutate(message, data)
    assert_same_verdict(message)


def test_every_seed_is_accepted_by_both_with_equal_views() -> None:
    """The comparison is not vacuous: each seed is accepted, the rich one with its parts."""
    for seed in SEEDS:
        outcome, fields = verdict(ClusterView, seed)
        assert outcome == "accepted", fields
        assert_same_verdict(seed)
    view = ClusterView.from_proto(_rich())
    assert view.max_requests == 77
    assert view.telemetry_labels == {"service_name": "svc"}
    assert view.upstream_tls is not None
    assert view.outlier_detection is not None
