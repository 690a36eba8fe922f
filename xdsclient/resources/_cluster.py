"""Cluster, validated as gRPC's xDS clients validate CDS (gRFCs A27, A29, A37, A42, A48, A50,
A52, A58, A75, A78).

Rules: the discovery type is EDS (its ``eds_config`` must be ``ads`` or ``self``), LOGICAL_DNS
(exactly one locality with one socket-address endpoint), or the aggregate cluster extension
(a non-empty ordered list of children); the LB policy comes from ``load_balancing_policy`` (the
first policy we support wins: built in, or registered by type in `_lb_registry`, whose config
is a ``TypedStruct`` naming it or its own message) or else from ``lb_policy`` (ROUND_ROBIN,
RING_HASH with XX_HASH and sane ring sizes, LEAST_REQUEST with choice_count >= 2);
``lrs_server`` must be ``self``; durations and percentages of outlier detection must be in
range; a transport socket must be an UpstreamTlsContext with a CA source.

Certificate provider instances (gRFC A29): gRPC checks each instance a cluster's TLS context
names against its own bootstrap's ``certificate_providers`` while decoding (C-core's
DecodeContext), so a cluster naming one it lacks is NACKed and the last good version stays in
use. The same check runs here when the decoder is given the bootstrap's instance names
(``certificate_providers``): `cluster_type` builds the CLUSTER type a client with that bootstrap
decodes with, and `XdsClient` uses it. Without them (``None``: `CLUSTER`, `decode_cluster`,
`ClusterView.from_proto` as called by default) the names are kept unchecked in
`ClusterView.upstream_tls`, for whoever holds the bootstrap to resolve.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Set
from functools import partial
from types import MappingProxyType
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
from google.protobuf import descriptor_pool, message_factory
from udpa.type.v1 import typed_struct_pb2 as udpa_typed_struct_pb2
from xds.type.v3 import typed_struct_pb2

from .._slots import slot_setters
from . import _cluster_wire
from ._lb_registry import lb_policy_type_registered
from ._type import ResourceType
from ._view import View, check_instance, invalid, metadata_dict, parse, unpack

__all__ = [
    "ClusterType",
    "ClusterView",
    "CustomLbPolicy",
    "LbPolicy",
    "LeastRequest",
    "OutlierDetection",
    "PickFirst",
    "RingHash",
    "RoundRobin",
    "UpstreamTls",
    "WeightedRoundRobin",
    "WrrLocality",
    "cluster_type",
    "decode_cluster",
]

_MAX_RING = 8 * 1024 * 1024
_MAX_DURATION_SECONDS = 315_576_000_000
_TELEMETRY_KEY = "com.google.csm.telemetry_labels"
_AGGREGATE = "envoy.clusters.aggregate"
#: Shared by every view without metadata or labels: one read-only mapping, not two dicts each.
_NO_MAPPING: Mapping[str, Any] = MappingProxyType({})


class ClusterType(enum.Enum):
    """How a cluster finds its endpoints: from EDS, by resolving a DNS name, or as an aggregate
    of other clusters."""

    EDS = "eds"
    LOGICAL_DNS = "logical_dns"
    AGGREGATE = "aggregate"


@attrs.frozen
class RoundRobin:
    """ROUND_ROBIN, the default policy: it has no settings."""


_ROUND_ROBIN = RoundRobin()  # the default policy: one shared (immutable) value


@attrs.frozen(kw_only=True)
class RingHash:
    """RING_HASH (gRFC A42): consistent hashing over a ring of ``min_ring_size`` to
    ``max_ring_size`` entries."""

    min_ring_size: int = 1024
    max_ring_size: int = _MAX_RING


@attrs.frozen(kw_only=True)
class LeastRequest:
    """LEAST_REQUEST: the least loaded of ``choice_count`` endpoints picked at random."""

    choice_count: int = 2


@attrs.frozen(kw_only=True)
class PickFirst:
    """pick_first: the first address that connects, the list shuffled first when
    ``shuffle_address_list`` is set."""

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


@attrs.frozen(kw_only=True)
class CustomLbPolicy:
    """A policy registered by type (gRFC A52, `xdsclient.lb.register_lb_policy`): its type
    name and its configuration, a dict (JSON values) from a ``TypedStruct``, or the typed
    message itself (the ``Any`` when its type is not in the protobuf descriptor pool).
    Compared by the configuration as sent (``raw``)."""

    type_name: str
    config: Any = attrs.field(eq=False, hash=False)
    raw: bytes = attrs.field(default=b"", repr=False)


#: A cluster's load-balancing policy (`ClusterView.lb_policy`): one of these values.
LbPolicy: TypeAlias = (
    RoundRobin
    | RingHash
    | LeastRequest
    | PickFirst
    | WeightedRoundRobin
    | WrrLocality
    | CustomLbPolicy
)

_TYPED_STRUCTS = {
    typed_struct_pb2.TypedStruct.DESCRIPTOR.full_name: typed_struct_pb2.TypedStruct,
    udpa_typed_struct_pb2.TypedStruct.DESCRIPTOR.full_name: udpa_typed_struct_pb2.TypedStruct,
}


@attrs.frozen(kw_only=True)
class EnvoyOutlierRules:
    """Envoy's outlier detection settings beyond gRFC A50, read only by a front end that
    follows Envoy (the HTTP transport; gRPC ignores them, as C-core does): the consecutive
    failure rules with their enforcement percentages, the local-origin split, and the
    interval rules' parameters whether or not gRPC would enforce them. Envoy's defaults;
    percentages above 100 read as 100 (gRPC accepts them, and Envoy always enforces then)."""

    consecutive_5xx: int = 5
    enforcing_consecutive_5xx: int = 100
    consecutive_gateway_failure: int = 5
    enforcing_consecutive_gateway_failure: int = 0
    #: count connect failures, resets and timeouts apart from the upstream's answers
    split_external_local_origin_errors: bool = False
    consecutive_local_origin_failure: int = 5
    enforcing_consecutive_local_origin_failure: int = 100
    enforcing_success_rate: int = 100
    enforcing_local_origin_success_rate: int = 100
    enforcing_failure_percentage: int = 0
    enforcing_failure_percentage_local_origin: int = 0
    #: (stdev_factor, minimum_hosts, request_volume)
    success_rate: tuple[int, int, int] = (1900, 5, 100)
    #: (threshold, minimum_hosts, request_volume)
    failure_percentage: tuple[int, int, int] = (85, 5, 50)
    #: eject one host even when ``max_ejection_percent`` would forbid it
    always_eject_one_host: bool = False
    #: seconds of random extra ejection time, at most
    max_ejection_time_jitter: float = 0.0


_ENVOY_RULES = EnvoyOutlierRules()


@attrs.frozen(kw_only=True)
class OutlierDetection:
    """gRFC A50's outlier detection settings; durations in seconds, percentages 0-100.
    ``envoy`` holds what only Envoy reads (`EnvoyOutlierRules`)."""

    interval: float = 10.0
    base_ejection_time: float = 30.0
    max_ejection_time: float = 300.0
    max_ejection_percent: int = 10
    #: (stdev_factor, enforcement_percentage, minimum_hosts, request_volume), or None when off
    success_rate_ejection: tuple[int, int, int, int] | None = None
    #: (threshold, enforcement_percentage, minimum_hosts, request_volume), or None when off
    failure_percentage_ejection: tuple[int, int, int, int] | None = None
    envoy: EnvoyOutlierRules = _ENVOY_RULES


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
    #: the service name its load reports carry: the EDS service name as the resource gives it,
    #: empty when it gives none (C-core reports it so)
    lrs_service_name: str = ""
    #: LOGICAL_DNS: the host and port to resolve
    dns_host: str = ""
    dns_port: int = 0
    #: AGGREGATE: the child clusters, in priority order
    aggregate_children: tuple[str, ...] = ()
    lb_policy: LbPolicy = _ROUND_ROBIN
    #: circuit breaking: the most concurrent requests (gRPC's default 1024)
    max_requests: int = 1024
    outlier_detection: OutlierDetection | None = None
    #: load reports go to the management server itself
    lrs_server_self: bool = False
    upstream_tls: UpstreamTls | None = None
    metadata: Mapping[str, Any] = attrs.field(default=_NO_MAPPING, hash=False)
    #: CSM telemetry labels (gRFC A78): service_name, service_namespace
    telemetry_labels: Mapping[str, str] = attrs.field(default=_NO_MAPPING, hash=False)
    raw: bytes = attrs.field(repr=False)

    @classmethod
    def from_proto(
        cls,
        message: Any,
        raw: bytes | None = None,
        *,
        certificate_providers: Set[str] | None = None,
    ) -> ClusterView:
        """Validate ``message``; raises `ResourceDecodeError` naming the field at fault.

        ``certificate_providers``: the instance names of the bootstrap's
        ``certificate_providers``; a TLS context naming another instance is rejected, as gRPC
        rejects it. None (the default) leaves instance names unchecked."""
        if raw is not None and cls is ClusterView:
            common = _common_eds(message, raw)
            if common is not None:
                return common
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
            fields["upstream_tls"] = _upstream_tls(
                name, message.transport_socket, certificate_providers
            )
        if message.HasField("metadata"):
            metadata = metadata_dict(message.metadata)
            fields["metadata"] = metadata
            labels = metadata.get(_TELEMETRY_KEY, {})
            fields["telemetry_labels"] = {
                key: value
                for key, value in labels.items()
                if key in ("service_name", "service_namespace") and isinstance(value, str)
            } or _NO_MAPPING
        return cls(name=name, raw=message.SerializeToString() if raw is None else raw, **fields)


# The common cluster (EDS over ADS or self, the default policy, nothing else gRPC reads) is
# checked with a few HasField calls (ListFields costs more than all of them: it builds every
# field's value) and built through its slots: attrs' __init__ of 15 fields costs more than
# reading it, N times per CDS response (see `.._slots`; tests/resources/test_cluster.py holds
# the builder to __init__ and the short path to the full one).
_OTHER_PARTS = (  # (a cluster_type shares a oneof with type: not EDS, already declined)
    "load_balancing_policy",
    "circuit_breakers",
    "outlier_detection",
    "lrs_server",
    "transport_socket",
    "metadata",
)
_EDS = cluster_pb2.Cluster.EDS
_ROUND_ROBIN_KIND = cluster_pb2.Cluster.ROUND_ROBIN
(
    _v_name,
    _v_type,
    _v_eds_service_name,
    _v_lrs_service_name,
    _v_dns_host,
    _v_dns_port,
    _v_aggregate_children,
    _v_lb_policy,
    _v_max_requests,
    _v_outlier_detection,
    _v_lrs_server_self,
    _v_upstream_tls,
    _v_metadata,
    _v_telemetry_labels,
    _v_raw,
) = slot_setters(ClusterView)


def _common_eds(message: Any, raw: bytes) -> ClusterView | None:
    """The view of an EDS cluster whose EDS config is ADS or self (with a service name unless
    old-style), with the default policy and none of the other parts gRPC reads; None for any
    other, which `ClusterView.from_proto` reads in full (and rejects where it must)."""
    if message.type != _EDS or message.lb_policy != _ROUND_ROBIN_KIND:
        return None
    has = message.HasField
    if not has("eds_cluster_config"):
        return None
    for part in _OTHER_PARTS:
        if has(part):
            return None
    eds = message.eds_cluster_config
    if eds.eds_config.WhichOneof("config_source_specifier") not in ("ads", "self"):
        return None
    name: str = message.name
    service: str = eds.service_name
    if not service and name.startswith("xdstp:"):
        return None
    return _new_eds_cluster(name, service, raw)


def _new_eds_cluster(name: str, service: str, raw: bytes) -> ClusterView:
    """`ClusterView(name=name, type=EDS, eds_service_name=service or name,
    lrs_service_name=service, raw=raw)`, through its slots."""
    view: ClusterView = _new(ClusterView)
    _v_name(view, name)
    _v_type(view, ClusterType.EDS)
    _v_eds_service_name(view, service or name)
    _v_lrs_service_name(view, service)
    _v_dns_host(view, "")
    _v_dns_port(view, 0)
    _v_aggregate_children(view, ())
    _v_lb_policy(view, _ROUND_ROBIN)
    _v_max_requests(view, 1024)
    _v_outlier_detection(view, None)
    _v_lrs_server_self(view, False)
    _v_upstream_tls(view, None)
    _v_metadata(view, _NO_MAPPING)
    _v_telemetry_labels(view, _NO_MAPPING)
    _v_raw(view, raw)
    return view


_new = object.__new__


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
        return _ROUND_ROBIN
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
        return _ROUND_ROBIN
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
    return _custom_policy(name, where, typed, type_name)


def _custom_policy(name: str, where: str, typed: Any, type_name: str) -> CustomLbPolicy | None:
    """A registered policy (A52): from a ``TypedStruct`` naming it (its ``value`` as a dict),
    or from its own typed config; None when its type is not registered."""
    struct_class = _TYPED_STRUCTS.get(type_name)
    if struct_class is not None:
        struct = unpack(name, where, typed, struct_class)
        inner = struct.type_url.rsplit("/", 1)[-1]
        if not inner or not lb_policy_type_registered(inner):
            return None
        from google.protobuf import json_format  # only for a custom policy's TypedStruct

        config = json_format.MessageToDict(struct.value)
        return CustomLbPolicy(type_name=inner, config=config, raw=typed.SerializeToString())
    if not lb_policy_type_registered(type_name):
        return None
    return CustomLbPolicy(
        type_name=type_name,
        config=_typed_config(name, where, typed, type_name),
        raw=typed.SerializeToString(),
    )


def _typed_config(name: str, where: str, typed: Any, type_name: str) -> Any:
    """The typed config as its message when the descriptor pool knows its type, else the
    ``Any`` as sent."""
    try:
        descriptor = descriptor_pool.Default().FindMessageTypeByName(type_name)
    except KeyError:
        return typed
    return unpack(name, where, typed, message_factory.GetMessageClass(descriptor))


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
        envoy=_envoy_outlier_rules(config),
    )


def _envoy_outlier_rules(config: Any) -> EnvoyOutlierRules:
    """Envoy's fields, read leniently: they never change gRPC's verdict on a cluster."""
    defaults = _ENVOY_RULES

    def get(field: str, default: int) -> int:
        value: int = getattr(config, field).value if config.HasField(field) else default
        return value

    def percent(field: str) -> int:
        return min(100, get(field, getattr(defaults, field)))

    jitter = config.max_ejection_time_jitter
    return EnvoyOutlierRules(
        consecutive_5xx=get("consecutive_5xx", defaults.consecutive_5xx),
        enforcing_consecutive_5xx=percent("enforcing_consecutive_5xx"),
        consecutive_gateway_failure=get(
            "consecutive_gateway_failure", defaults.consecutive_gateway_failure
        ),
        enforcing_consecutive_gateway_failure=percent("enforcing_consecutive_gateway_failure"),
        split_external_local_origin_errors=config.split_external_local_origin_errors,
        consecutive_local_origin_failure=get(
            "consecutive_local_origin_failure", defaults.consecutive_local_origin_failure
        ),
        enforcing_consecutive_local_origin_failure=percent(
            "enforcing_consecutive_local_origin_failure"
        ),
        enforcing_success_rate=percent("enforcing_success_rate"),
        enforcing_local_origin_success_rate=percent("enforcing_local_origin_success_rate"),
        enforcing_failure_percentage=percent("enforcing_failure_percentage"),
        enforcing_failure_percentage_local_origin=percent(
            "enforcing_failure_percentage_local_origin"
        ),
        success_rate=(
            get("success_rate_stdev_factor", 1900),
            get("success_rate_minimum_hosts", 5),
            get("success_rate_request_volume", 100),
        ),
        failure_percentage=(
            get("failure_percentage_threshold", 85),
            get("failure_percentage_minimum_hosts", 5),
            get("failure_percentage_request_volume", 50),
        ),
        always_eject_one_host=config.always_eject_one_host.value,
        max_ejection_time_jitter=max(0.0, jitter.seconds + jitter.nanos / 1e9),
    )


def _upstream_tls(name: str, socket: Any, providers: Set[str] | None) -> UpstreamTls:
    path = "transport_socket"
    context = unpack(name, f"{path}.typed_config", socket.typed_config, tls_pb2.UpstreamTlsContext)
    common = context.common_tls_context
    where = f"{path}.typed_config.common_tls_context"
    if common.HasField("combined_validation_context"):
        validation = common.combined_validation_context.default_validation_context
        ca_field = "combined_validation_context.default_validation_context"
    elif common.HasField("validation_context"):
        validation = common.validation_context
        ca_field = "validation_context"
    else:
        raise invalid(name, where, "needs a validation context (a CA certificate provider)")
    provider = validation.ca_certificate_provider_instance
    ca_field += ".ca_certificate_provider_instance"
    if not validation.HasField("ca_certificate_provider_instance") and common.HasField(
        "combined_validation_context"
    ):  # the deprecated field gRPC still reads
        provider = (
            common.combined_validation_context.validation_context_certificate_provider_instance
        )
        ca_field = "combined_validation_context.validation_context_certificate_provider_instance"
    system = validation.HasField("system_root_certs")
    if not provider.instance_name and not system:
        raise invalid(
            name,
            f"{where}.validation_context",
            "needs ca_certificate_provider_instance or system_root_certs",
        )
    identity = common.tls_certificate_provider_instance
    identity_field = "tls_certificate_provider_instance"
    if not common.HasField(identity_field):  # the deprecated field
        identity = common.tls_certificate_certificate_provider_instance
        identity_field = "tls_certificate_certificate_provider_instance"
    if providers is not None:
        if provider.instance_name:  # else the system roots
            check_instance(name, f"{where}.{ca_field}", provider.instance_name, providers)
        if common.HasField(identity_field):  # set: C-core looks it up, even an empty name
            check_instance(name, f"{where}.{identity_field}", identity.instance_name, providers)
    return UpstreamTls(
        sni=context.sni,
        ca_provider_instance=provider.instance_name,
        ca_certificate_name=provider.certificate_name,
        use_system_root_certs=system,
        identity_provider_instance=identity.instance_name,
        identity_certificate_name=identity.certificate_name,
    )


def _decode_upb(
    data: bytes, certificate_providers: Set[str] | None = None
) -> tuple[str, ClusterView]:
    """bytes -> (name, view) through upb and `ClusterView.from_proto`: the decoder of the
    pure-Python build, and of every cluster the compiled wire reader leaves to upb."""
    message = parse(cluster_pb2.Cluster, data)
    return message.name, ClusterView.from_proto(
        message, data, certificate_providers=certificate_providers
    )


def _wire_decoder(
    fallback: Callable[[bytes], tuple[str, ClusterView]],
) -> Callable[[bytes], tuple[str, ClusterView]]:
    """The compiled wire reader in front of ``fallback`` when it runs compiled (see
    `_cluster_wire`: `xdsclient._compiled` decides whether it does), else ``fallback`` alone:
    interpreted, the reader is no faster than upb."""
    if not _cluster_wire.COMPILED:
        return fallback
    return partial(_cluster_wire.decode, fallback)


def _bind_wire_reader() -> None:
    """Lend the wire reader the view class, its slot setters and the common view's values."""
    _cluster_wire.bind_view(
        ClusterView, slot_setters(ClusterView), (ClusterType.EDS, _ROUND_ROBIN, _NO_MAPPING)
    )


_bind_wire_reader()
_DECODE: Callable[[bytes], tuple[str, ClusterView]] = _wire_decoder(_decode_upb)


def decode_cluster(
    data: bytes, certificate_providers: Set[str] | None = None
) -> tuple[str, ClusterView]:
    """The CLUSTER type's decoder: bytes -> (name, view); ``certificate_providers`` as
    `ClusterView.from_proto` takes them."""
    if certificate_providers is None:
        return _DECODE(data)
    return _decode_upb(data, certificate_providers)


_CLUSTER_URL = "type.googleapis.com/" + cluster_pb2.Cluster.DESCRIPTOR.full_name


def cluster_type(certificate_providers: Iterable[str]) -> ResourceType[ClusterView]:
    """The CLUSTER type as a client whose bootstrap defines ``certificate_providers`` (their
    instance names; none: an empty iterable) decodes it: a cluster whose TLS context names
    another instance is NACKed (gRFC A29, as gRPC does), naming the field and the instance.
    `XdsClient` decodes clusters with the type of its own bootstrap; it equals `CLUSTER`."""
    decode = _wire_decoder(
        partial(_decode_upb, certificate_providers=frozenset(certificate_providers))
    )
    return ResourceType(type_url=_CLUSTER_URL, decode=decode, all_resources_required_in_sotw=True)
