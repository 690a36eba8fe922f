"""The Cluster decoder as it was before it was made lean, kept as the reference
tests/resources/test_cluster_differential.py compares `xdsclient.resources._cluster` against.
Only ``ClusterView.from_proto`` is used; the value classes are its own copies, compared field
by field. Do not "improve" it: it is the specification by example.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, ClassVar, TypeAlias

import attrs
from envoy.config.cluster.v3 import cluster_pb2
from envoy.extensions.clusters.aggregate.v3 import cluster_pb2 as aggregate_pb2
from envoy.extensions.load_balancing_policies.client_side_weighted_round_robin.v3 import (
    client_side_weighted_round_robin_pb2 as wrr_pb2,
)
from envoy.extensions.load_balancing_policies.least_request.v3 import least_request_pb2
from envoy.extensions.load_balancing_policies.pick_first.v3 import pick_first_pb2
from envoy.extensions.load_balancing_policies.ring_hash.v3 import ring_hash_pb2
from envoy.extensions.load_balancing_policies.round_robin.v3 import round_robin_pb2
from envoy.extensions.load_balancing_policies.wrr_locality.v3 import wrr_locality_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from xdsclient.resources._view import View, invalid, metadata_dict, parse, unpack

__all__ = [
    "ClusterType",
    "ClusterView",
    "LbPolicy",
    "LeastRequest",
    "OutlierDetection",
    "PickFirst",
    "RingHash",
    "RoundRobin",
    "UpstreamTls",
    "WeightedRoundRobin",
    "WrrLocality",
    "decode_cluster",
]

_MAX_RING = 8 * 1024 * 1024
_MAX_DURATION_SECONDS = 315_576_000_000
_TELEMETRY_KEY = "com.google.csm.telemetry_labels"
_AGGREGATE = "envoy.clusters.aggregate"


class ClusterType(enum.Enum):
    EDS = "eds"
    LOGICAL_DNS = "logical_dns"
    AGGREGATE = "aggregate"


@attrs.frozen
class RoundRobin:
    pass


@attrs.frozen(kw_only=True)
class RingHash:
    min_ring_size: int = 1024
    max_ring_size: int = _MAX_RING


@attrs.frozen(kw_only=True)
class LeastRequest:
    choice_count: int = 2


@attrs.frozen(kw_only=True)
class PickFirst:
    shuffle_address_list: bool = False


@attrs.frozen(kw_only=True)
class WeightedRoundRobin:
    """Client-side weighted round robin (gRFC A58); durations in seconds."""

    enable_oob_load_report: bool = False
    oob_reporting_period: float = 10.0
    blackout_period: float = 10.0
    weight_expiration_period: float = 180.0
    weight_update_period: float = 1.0
    error_utilization_penalty: float = 1.0


@attrs.frozen(kw_only=True)
class WrrLocality:
    """Weighted round robin across localities, ``child`` within each (gRFC A52)."""

    child: LbPolicy


LbPolicy: TypeAlias = (
    RoundRobin | RingHash | LeastRequest | PickFirst | WeightedRoundRobin | WrrLocality
)


@attrs.frozen(kw_only=True)
class EnvoyOutlierRules:
    """Envoy's outlier detection settings beyond gRFC A50 (percentages capped at 100)."""

    consecutive_5xx: int = 5
    enforcing_consecutive_5xx: int = 100
    consecutive_gateway_failure: int = 5
    enforcing_consecutive_gateway_failure: int = 0
    split_external_local_origin_errors: bool = False
    consecutive_local_origin_failure: int = 5
    enforcing_consecutive_local_origin_failure: int = 100
    enforcing_success_rate: int = 100
    enforcing_local_origin_success_rate: int = 100
    enforcing_failure_percentage: int = 0
    enforcing_failure_percentage_local_origin: int = 0
    success_rate: tuple[int, int, int] = (1900, 5, 100)
    failure_percentage: tuple[int, int, int] = (85, 5, 50)
    always_eject_one_host: bool = False
    max_ejection_time_jitter: float = 0.0


@attrs.frozen(kw_only=True)
class OutlierDetection:
    """gRFC A50's outlier detection settings; durations in seconds, percentages 0-100."""

    interval: float = 10.0
    base_ejection_time: float = 30.0
    max_ejection_time: float = 300.0
    max_ejection_percent: int = 10
    #: (stdev_factor, enforcement_percentage, minimum_hosts, request_volume), or None when off
    success_rate_ejection: tuple[int, int, int, int] | None = None
    #: (threshold, enforcement_percentage, minimum_hosts, request_volume), or None when off
    failure_percentage_ejection: tuple[int, int, int, int] | None = None
    envoy: EnvoyOutlierRules = EnvoyOutlierRules()


@attrs.frozen(kw_only=True)
class UpstreamTls:
    """What an upstream TLS context asks for (gRFC A29): certificate providers and SNI."""

    sni: str = ""
    ca_provider_instance: str = ""
    ca_certificate_name: str = ""
    use_system_root_certs: bool = False
    identity_provider_instance: str = ""
    identity_certificate_name: str = ""


@attrs.frozen(kw_only=True, eq=False)
class ClusterView(View):
    """A validated Cluster."""

    _message_class: ClassVar[Any] = cluster_pb2.Cluster

    name: str
    type: ClusterType
    #: EDS: the ClusterLoadAssignment to watch (the cluster's name when the resource gives none)
    eds_service_name: str = ""
    lrs_service_name: str = ""
    #: LOGICAL_DNS: the host and port to resolve
    dns_host: str = ""
    dns_port: int = 0
    #: AGGREGATE: the child clusters, in priority order
    aggregate_children: tuple[str, ...] = ()
    lb_policy: LbPolicy = RoundRobin()
    #: circuit breaking: the most concurrent requests (gRPC's default 1024)
    max_requests: int = 1024
    outlier_detection: OutlierDetection | None = None
    #: load reports go to the management server itself
    lrs_server_self: bool = False
    upstream_tls: UpstreamTls | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict, hash=False)
    #: CSM telemetry labels (gRFC A78): service_name, service_namespace
    telemetry_labels: Mapping[str, str] = attrs.field(factory=dict, hash=False)
    raw: bytes = attrs.field(repr=False)

    @classmethod
    def from_proto(cls, message: Any, raw: bytes | None = None) -> ClusterView:
        """Validate ``message``; raises `ResourceDecodeError` naming the field at fault."""
        name: str = message.name
        fields: dict[str, Any] = {}
        if message.HasField("cluster_type"):
            fields.update(_aggregate(name, message.cluster_type))
        elif message.type == cluster_pb2.Cluster.EDS:
            source = message.eds_cluster_config.eds_config
            if source.WhichOneof("config_source_specifier") not in ("ads", "self"):
                raise invalid(name, "eds_cluster_config.eds_config", "must be ads or self")
            service = message.eds_cluster_config.service_name
            if not service and name.startswith("xdstp:"):
                raise invalid(
                    name, "eds_cluster_config.service_name", "required for xdstp:// cluster names"
                )
            fields.update(
                type=ClusterType.EDS, eds_service_name=service or name, lrs_service_name=service
            )
        elif message.type == cluster_pb2.Cluster.LOGICAL_DNS:
            fields.update(_logical_dns(name, message.load_assignment))
        else:
            kind = _enum_name(cluster_pb2.Cluster.DiscoveryType, message.type)
            raise invalid(name, "type", f"unsupported discovery type {kind}")
        fields["lb_policy"] = _lb_policy(name, message)
        for threshold in message.circuit_breakers.thresholds:
            if threshold.priority == 0 and threshold.HasField("max_requests"):  # DEFAULT priority
                fields["max_requests"] = threshold.max_requests.value
        if message.HasField("outlier_detection"):
            fields["outlier_detection"] = _outlier_detection(name, message.outlier_detection)
        if message.HasField("lrs_server"):
            if message.lrs_server.WhichOneof("config_source_specifier") != "self":
                raise invalid(name, "lrs_server", "must be self")
            fields["lrs_server_self"] = True
        if message.HasField("transport_socket"):
            fields["upstream_tls"] = _upstream_tls(name, message.transport_socket)
        if message.HasField("metadata"):
            metadata = metadata_dict(message.metadata)
            fields["metadata"] = metadata
            labels = metadata.get(_TELEMETRY_KEY, {})
            fields["telemetry_labels"] = {
                key: value
                for key, value in labels.items()
                if key in ("service_name", "service_namespace") and isinstance(value, str)
            }
        return cls(name=name, raw=message.SerializeToString() if raw is None else raw, **fields)


def _aggregate(name: str, extension: Any) -> dict[str, Any]:
    if extension.name != _AGGREGATE:
        raise invalid(name, "cluster_type.name", f"unsupported cluster type {extension.name!r}")
    config = unpack(
        name, "cluster_type.typed_config", extension.typed_config, aggregate_pb2.ClusterConfig
    )
    if not config.clusters:
        raise invalid(name, "cluster_type.typed_config.clusters", "must not be empty")
    return {"type": ClusterType.AGGREGATE, "aggregate_children": tuple(config.clusters)}


def _logical_dns(name: str, assignment: Any) -> dict[str, Any]:
    path = "load_assignment"
    if len(assignment.endpoints) != 1:
        raise invalid(name, f"{path}.endpoints", "LOGICAL_DNS needs exactly one locality")
    lb_endpoints = assignment.endpoints[0].lb_endpoints
    if len(lb_endpoints) != 1:
        raise invalid(
            name, f"{path}.endpoints[0].lb_endpoints", "LOGICAL_DNS needs exactly one endpoint"
        )
    address = lb_endpoints[0].endpoint.address
    socket = address.socket_address
    where = f"{path}.endpoints[0].lb_endpoints[0].endpoint.address.socket_address"
    if not address.HasField("socket_address") or not socket.address:
        raise invalid(name, where, "must be a socket address with a host")
    if socket.WhichOneof("port_specifier") != "port_value":
        raise invalid(name, f"{where}.port_value", "required")
    return {
        "type": ClusterType.LOGICAL_DNS,
        "dns_host": socket.address,
        "dns_port": socket.port_value,
    }


def _lb_policy(name: str, message: Any) -> LbPolicy:
    if message.HasField("load_balancing_policy"):
        for i, policy in enumerate(message.load_balancing_policy.policies):
            chosen = _typed_policy(
                name, f"load_balancing_policy.policies[{i}]", policy.typed_extension_config, 0
            )
            if chosen is not None:
                return chosen
        raise invalid(name, "load_balancing_policy", "no supported policy")
    kind = message.lb_policy
    if kind == cluster_pb2.Cluster.ROUND_ROBIN:
        return RoundRobin()
    if kind == cluster_pb2.Cluster.RING_HASH:
        config = message.ring_hash_lb_config
        if config.hash_function != cluster_pb2.Cluster.RingHashLbConfig.XX_HASH:
            raise invalid(name, "ring_hash_lb_config.hash_function", "must be XX_HASH")
        return _ring_hash(name, "ring_hash_lb_config", config)
    if kind == cluster_pb2.Cluster.LEAST_REQUEST:
        return _least_request(name, "least_request_lb_config", message.least_request_lb_config)
    raise invalid(
        name, "lb_policy", f"unsupported {_enum_name(cluster_pb2.Cluster.LbPolicy, kind)}"
    )


def _enum_name(enum_type: Any, value: int) -> str:
    """The enum value's name, or its number when this protobuf version does not know it."""
    try:
        name: str = enum_type.Name(value)
    except ValueError:
        return str(value)
    return name


def _typed_policy(name: str, path: str, extension: Any, depth: int) -> LbPolicy | None:
    """One ``TypedExtensionConfig`` of a policy list; None when we do not support its type."""
    typed = extension.typed_config
    type_name = typed.type_url.rsplit("/", 1)[-1]
    where = f"{path}.typed_extension_config.typed_config"
    if type_name == round_robin_pb2.RoundRobin.DESCRIPTOR.full_name:
        return RoundRobin()
    if type_name == ring_hash_pb2.RingHash.DESCRIPTOR.full_name:
        config = unpack(name, where, typed, ring_hash_pb2.RingHash)
        if config.hash_function not in (0, 1):  # DEFAULT_HASH, XX_HASH
            raise invalid(name, f"{where}.hash_function", "must be XX_HASH")
        return _ring_hash(name, where, config)
    if type_name == least_request_pb2.LeastRequest.DESCRIPTOR.full_name:
        return _least_request(
            name, where, unpack(name, where, typed, least_request_pb2.LeastRequest)
        )
    if type_name == pick_first_pb2.PickFirst.DESCRIPTOR.full_name:
        config = unpack(name, where, typed, pick_first_pb2.PickFirst)
        return PickFirst(shuffle_address_list=config.shuffle_address_list)
    if type_name == wrr_pb2.ClientSideWeightedRoundRobin.DESCRIPTOR.full_name:
        return _weighted_round_robin(
            name, where, unpack(name, where, typed, wrr_pb2.ClientSideWeightedRoundRobin)
        )
    if type_name == wrr_locality_pb2.WrrLocality.DESCRIPTOR.full_name:
        if depth >= 16:
            raise invalid(name, where, "policies nest deeper than 16")
        config = unpack(name, where, typed, wrr_locality_pb2.WrrLocality)
        for i, child in enumerate(config.endpoint_picking_policy.policies):
            chosen = _typed_policy(
                name,
                f"{where}.endpoint_picking_policy.policies[{i}]",
                child.typed_extension_config,
                depth + 1,
            )
            if chosen is not None:
                return WrrLocality(child=chosen)
        raise invalid(name, f"{where}.endpoint_picking_policy", "no supported policy")
    return None


def _ring_hash(name: str, path: str, config: Any) -> RingHash:
    minimum = config.minimum_ring_size.value if config.HasField("minimum_ring_size") else 1024
    maximum = config.maximum_ring_size.value if config.HasField("maximum_ring_size") else _MAX_RING
    if minimum > _MAX_RING or maximum > _MAX_RING:
        raise invalid(name, path, f"ring sizes must be at most {_MAX_RING}")
    if minimum > maximum:
        raise invalid(name, f"{path}.minimum_ring_size", "must not exceed maximum_ring_size")
    return RingHash(min_ring_size=minimum, max_ring_size=maximum)


def _least_request(name: str, path: str, config: Any) -> LeastRequest:
    choices = config.choice_count.value if config.HasField("choice_count") else 2
    if choices < 2:
        raise invalid(name, f"{path}.choice_count", "must be at least 2")
    return LeastRequest(choice_count=choices)


def _weighted_round_robin(name: str, path: str, config: Any) -> WeightedRoundRobin:
    def seconds(field: str, default: float) -> float:
        if not config.HasField(field):
            return default
        return _duration(name, f"{path}.{field}", getattr(config, field))

    penalty = (
        config.error_utilization_penalty.value
        if config.HasField("error_utilization_penalty")
        else 1.0
    )
    if penalty < 0:
        raise invalid(name, f"{path}.error_utilization_penalty", "must not be negative")
    return WeightedRoundRobin(
        enable_oob_load_report=config.enable_oob_load_report.value,
        oob_reporting_period=seconds("oob_reporting_period", 10.0),
        blackout_period=seconds("blackout_period", 10.0),
        weight_expiration_period=seconds("weight_expiration_period", 180.0),
        weight_update_period=max(seconds("weight_update_period", 1.0), 0.1),
        error_utilization_penalty=penalty,
    )


def _duration(name: str, path: str, duration: Any) -> float:
    if duration.seconds < 0 or duration.nanos < 0:
        raise invalid(name, path, "must not be negative")
    if duration.seconds > _MAX_DURATION_SECONDS or duration.nanos >= 1_000_000_000:
        raise invalid(name, path, "out of range")
    seconds: float = duration.seconds + duration.nanos / 1e9
    return seconds


def _outlier_detection(name: str, config: Any) -> OutlierDetection:
    path = "outlier_detection"

    def seconds(field: str, default: float) -> float:
        return (
            _duration(name, f"{path}.{field}", getattr(config, field))
            if config.HasField(field)
            else default
        )

    def percent(field: str, default: int, *, checked: bool = True) -> int:
        value: int = getattr(config, field).value if config.HasField(field) else default
        if checked and value > 100:
            raise invalid(name, f"{path}.{field}", "must be at most 100")
        return value

    def count(field: str, default: int) -> int:
        value: int = getattr(config, field).value if config.HasField(field) else default
        return value

    base = seconds("base_ejection_time", 30.0)
    success_enforcement = percent("enforcing_success_rate", 100)
    failure_enforcement = percent("enforcing_failure_percentage", 0)
    threshold = percent("failure_percentage_threshold", 85, checked=False)  # as C-core
    return OutlierDetection(
        interval=seconds("interval", 10.0),
        base_ejection_time=base,
        max_ejection_time=seconds("max_ejection_time", max(300.0, base)),
        max_ejection_percent=percent("max_ejection_percent", 10),
        success_rate_ejection=(
            count("success_rate_stdev_factor", 1900),
            success_enforcement,
            count("success_rate_minimum_hosts", 5),
            count("success_rate_request_volume", 100),
        )
        if success_enforcement > 0
        else None,
        failure_percentage_ejection=(
            threshold,
            failure_enforcement,
            count("failure_percentage_minimum_hosts", 5),
            count("failure_percentage_request_volume", 50),
        )
        if failure_enforcement > 0
        else None,
        envoy=_envoy_rules(config),
    )


#: Envoy's wrapped counts (name, default, whether a percentage capped at 100)
_ENVOY_COUNTS = (
    ("consecutive_5xx", 5, False),
    ("enforcing_consecutive_5xx", 100, True),
    ("consecutive_gateway_failure", 5, False),
    ("enforcing_consecutive_gateway_failure", 0, True),
    ("consecutive_local_origin_failure", 5, False),
    ("enforcing_consecutive_local_origin_failure", 100, True),
    ("enforcing_success_rate", 100, True),
    ("enforcing_local_origin_success_rate", 100, True),
    ("enforcing_failure_percentage", 0, True),
    ("enforcing_failure_percentage_local_origin", 0, True),
)


def _envoy_rules(config: Any) -> EnvoyOutlierRules:
    def wrapped(field: str, default: int) -> int:
        value: int = getattr(config, field).value if config.HasField(field) else default
        return value

    fields: dict[str, Any] = {}
    for field, default, capped in _ENVOY_COUNTS:
        value = wrapped(field, default)
        fields[field] = min(value, 100) if capped else value
    jitter = config.max_ejection_time_jitter
    return EnvoyOutlierRules(
        split_external_local_origin_errors=config.split_external_local_origin_errors,
        success_rate=(
            wrapped("success_rate_stdev_factor", 1900),
            wrapped("success_rate_minimum_hosts", 5),
            wrapped("success_rate_request_volume", 100),
        ),
        failure_percentage=(
            wrapped("failure_percentage_threshold", 85),
            wrapped("failure_percentage_minimum_hosts", 5),
            wrapped("failure_percentage_request_volume", 50),
        ),
        always_eject_one_host=config.always_eject_one_host.value,
        max_ejection_time_jitter=max(0.0, jitter.seconds + jitter.nanos / 1e9),
        **fields,
    )


def _upstream_tls(name: str, socket: Any) -> UpstreamTls:
    path = "transport_socket"
    context = unpack(name, f"{path}.typed_config", socket.typed_config, tls_pb2.UpstreamTlsContext)
    common = context.common_tls_context
    where = f"{path}.typed_config.common_tls_context"
    if common.HasField("combined_validation_context"):
        validation = common.combined_validation_context.default_validation_context
    elif common.HasField("validation_context"):
        validation = common.validation_context
    else:
        raise invalid(name, where, "needs a validation context (a CA certificate provider)")
    provider = validation.ca_certificate_provider_instance
    if not validation.HasField("ca_certificate_provider_instance") and common.HasField(
        "combined_validation_context"
    ):  # the deprecated field gRPC still reads
        provider = (
            common.combined_validation_context.validation_context_certificate_provider_instance
        )
    system = validation.HasField("system_root_certs")
    if not provider.instance_name and not system:
        raise invalid(
            name,
            f"{where}.validation_context",
            "needs ca_certificate_provider_instance or system_root_certs",
        )
    identity = common.tls_certificate_provider_instance
    if not common.HasField("tls_certificate_provider_instance"):  # the deprecated field
        identity = common.tls_certificate_certificate_provider_instance
    return UpstreamTls(
        sni=context.sni,
        ca_provider_instance=provider.instance_name,
        ca_certificate_name=provider.certificate_name,
        use_system_root_certs=system,
        identity_provider_instance=identity.instance_name,
        identity_certificate_name=identity.certificate_name,
    )


def decode_cluster(data: bytes) -> tuple[str, ClusterView]:
    """The CLUSTER type's decoder: bytes -> (name, view)."""
    message = parse(cluster_pb2.Cluster, data)
    return message.name, ClusterView.from_proto(message, data)
