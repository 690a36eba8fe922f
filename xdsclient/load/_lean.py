"""Lean decoding for simulated clients: a resource's name and the names it leads to, once per
distinct serialized resource in the whole run.

Why: a load generator does not need validated views (the client's decoders build them for
applications); it needs the walk's next names (Listener -> RouteConfiguration -> Clusters ->
ClusterLoadAssignments) and an identity for each version. A thousand clients receive the same
bytes for the same version of a resource, so `SharedDecoder` keeps each distinct body's result,
keyed by the bytes themselves, and every client after the first pays one dict lookup. Under
``validate`` the client's own decoder checks each distinct body first (a rejection NACKs it, as
the client would), still once per body: clusters against the certificate provider instances of
the clients' bootstrap, as `XdsClient` decodes them (none for clients given only a server).

A `Lean` value is shared by every client holding that version: its ``serial`` names the version
across clients, which is how fan-out spread is measured (docs/load-testing.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.clusters.aggregate.v3 import cluster_pb2 as aggregate_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from .. import resources
from .._errors import ResourceDecodeError
from .._xdstp import InvalidNameError, canonical_name

__all__ = ["CLUSTER", "ENDPOINT", "KINDS", "LISTENER", "ROUTE", "Lean", "SharedDecoder"]

LISTENER = resources.LISTENER.type_url
ROUTE = resources.ROUTE_CONFIGURATION.type_url
CLUSTER = resources.CLUSTER.type_url
ENDPOINT = resources.ENDPOINT.type_url
#: the walk's types by the names scenarios use
KINDS = {"listener": LISTENER, "route": ROUTE, "cluster": CLUSTER, "endpoint": ENDPOINT}
_HCM = "type.googleapis.com/" + hcm_pb2.HttpConnectionManager.DESCRIPTOR.full_name
_AGGREGATE = "type.googleapis.com/" + aggregate_pb2.ClusterConfig.DESCRIPTOR.full_name
_BUILTIN = {rtype.type_url: rtype for rtype in resources.BUILTIN_TYPES}
#: bodies kept per decoder before it starts afresh (a long run of updates stays bounded)
_MAX_KEPT = 200_000


@attrs.frozen(slots=True)
class Lean:
    """What a simulated client keeps of one version of a resource."""

    #: names this resource leads to, by type URL (a listener's route configuration, ...)
    refs: tuple[tuple[str, tuple[str, ...]], ...]
    #: unique per distinct body in a run: the same version held by different clients
    serial: int


def _canonical(name: str, type_url: str) -> str:
    """A reference as the session keys what it names (xdstp names in canonical form, as the
    client's walk looks them up); a malformed one as written, so it never resolves."""
    try:
        return canonical_name(name, type_url)
    except InvalidNameError:
        return name


def _hcm_refs(manager: Any, out: dict[str, list[str]]) -> None:
    if manager.HasField("rds"):
        out.setdefault(ROUTE, []).append(manager.rds.route_config_name)
    elif manager.HasField("route_config"):
        _route_refs(manager.route_config, out)


def _listener(data: bytes) -> tuple[str, dict[str, list[str]]]:
    message = listener_pb2.Listener.FromString(data)
    out: dict[str, list[str]] = {}
    if message.HasField("api_listener"):
        manager = hcm_pb2.HttpConnectionManager.FromString(message.api_listener.api_listener.value)
        _hcm_refs(manager, out)
    for chain in message.filter_chains:
        for network_filter in chain.filters:
            if network_filter.typed_config.type_url == _HCM:
                manager = hcm_pb2.HttpConnectionManager.FromString(
                    network_filter.typed_config.value
                )
                _hcm_refs(manager, out)
    return message.name, out


def _route_refs(config: Any, out: dict[str, list[str]]) -> None:
    clusters = out.setdefault(CLUSTER, [])
    for host in config.virtual_hosts:
        for route in host.routes:
            action = route.route
            if action.cluster:
                clusters.append(action.cluster)
            for weighted in action.weighted_clusters.clusters:
                clusters.append(weighted.name)


def _route(data: bytes) -> tuple[str, dict[str, list[str]]]:
    message = route_pb2.RouteConfiguration.FromString(data)
    out: dict[str, list[str]] = {}
    _route_refs(message, out)
    return message.name, out


def _cluster(data: bytes) -> tuple[str, dict[str, list[str]]]:
    message = cluster_pb2.Cluster.FromString(data)
    out: dict[str, list[str]] = {}
    if message.HasField("cluster_type"):
        if message.cluster_type.typed_config.type_url == _AGGREGATE:
            children = aggregate_pb2.ClusterConfig.FromString(
                message.cluster_type.typed_config.value
            )
            out[CLUSTER] = list(children.clusters)
    elif message.type == cluster_pb2.Cluster.EDS:
        out[ENDPOINT] = [message.eds_cluster_config.service_name or message.name]
    return message.name, out


def _endpoint(data: bytes) -> tuple[str, dict[str, list[str]]]:
    return endpoint_pb2.ClusterLoadAssignment.FromString(data).cluster_name, {}


_READERS: dict[str, Callable[[bytes], tuple[str, dict[str, list[str]]]]] = {
    LISTENER: _listener,
    ROUTE: _route,
    CLUSTER: _cluster,
    ENDPOINT: _endpoint,
}


class SharedDecoder:
    """One run's decoding: each distinct body read once, shared by every client."""

    def __init__(
        self, *, validate: bool = False, certificate_providers: Iterable[str] = ()
    ) -> None:
        """``certificate_providers``: the instance names of the clients' bootstrap, which
        ``validate`` checks clusters and server listeners against (gRFC A29, as `XdsClient`
        does)."""
        self._validate = validate
        names = frozenset(certificate_providers)
        self._checks = {
            **_BUILTIN,
            CLUSTER: resources.cluster_type(names),
            LISTENER: resources.listener_type(names),
        }
        self._kept: dict[bytes, tuple[str, Lean] | ResourceDecodeError] = {}
        self._serial = 0
        #: bodies decoded (the rest were shared)
        self.decoded = 0

    def decoder(self, type_url: str) -> Callable[[bytes], tuple[str, Lean]]:
        """The ``decode`` of a `ResourceType` of ``type_url`` reading through this cache."""
        reader = _READERS[type_url]
        check = self._checks[type_url].decode if self._validate else None
        kept = self._kept

        def decode(data: bytes) -> tuple[str, Lean]:
            found = kept.get(data)
            if found is None:
                found = self._decode(reader, check, data)
            if isinstance(found, ResourceDecodeError):
                raise found
            return found

        return decode

    def _decode(
        self,
        reader: Callable[[bytes], tuple[str, dict[str, list[str]]]],
        check: Callable[[bytes], Any] | None,
        data: bytes,
    ) -> tuple[str, Lean] | ResourceDecodeError:
        if len(self._kept) >= _MAX_KEPT:
            self._kept.clear()
        self.decoded += 1
        result: tuple[str, Lean] | ResourceDecodeError
        try:
            if check is not None:
                check(data)
            name, refs = reader(data)
            self._serial += 1
            frozen = tuple(
                (kind, tuple(dict.fromkeys(_canonical(name, kind) for name in names)))
                for kind, names in refs.items()
            )
            result = (name, Lean(refs=frozen, serial=self._serial))
        except ResourceDecodeError as exc:
            result = exc
        except Exception as exc:  # protobuf's DecodeError, a foreign type: mapped here
            result = ResourceDecodeError(f"cannot parse: {exc}")
        self._kept[data] = result
        return result
