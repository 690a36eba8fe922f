"""Resource types: the built-in xDS types, their validated views, and custom types.

Listener, RouteConfiguration, Cluster and ClusterLoadAssignment decode into frozen views that
hold what a data-plane client needs, validated as gRPC validates them; ``view.proto`` decodes the
original message on demand. `select_virtual_host` and `match_route` are gRPC's routing rules as
pure functions; `select_http_virtual_host`, `match_http_route` and the rewrite helpers are Envoy's
HTTP router's, over the same values.
"""

from __future__ import annotations

from .._errors import ResourceDecodeError
from ._builtin import (
    BUILTIN_TYPES,
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE_CONFIGURATION,
    RUNTIME,
    SCOPED_ROUTE_CONFIGURATION,
    SECRET,
    VIRTUAL_HOST,
)
from ._cluster import (
    ClusterType,
    ClusterView,
    CustomLbPolicy,
    EnvoyOutlierRules,
    LbPolicy,
    LeastRequest,
    OutlierDetection,
    PickFirst,
    RingHash,
    RoundRobin,
    UpstreamTls,
    WeightedRoundRobin,
    WrrLocality,
    cluster_type,
)
from ._endpoint import (
    ClusterLoadAssignmentView,
    DropOverload,
    Endpoint,
    HealthStatus,
    LocalityEndpoints,
)
from ._http_routing import (
    http_route_matches,
    match_http_route,
    redirect_location,
    rewrite_authority,
    rewrite_path,
    select_http_virtual_host,
)
from ._lb_registry import register_lb_policy_type, unregister_lb_policy_type
from ._listener import (
    KNOWN_HTTP_FILTERS,
    DownstreamTls,
    FilterChain,
    FilterChainMatch,
    HttpConnectionManager,
    HttpFilter,
    ListenerView,
    listener_type,
)
from ._locality import Locality
from ._route import RouteConfigurationView
from ._route_values import (
    DEFAULT_ROUTE_TIMEOUT,
    ClusterWeight,
    DirectResponse,
    HashPolicy,
    HashPolicyKind,
    HeaderAppendAction,
    HeaderMatcher,
    HeaderMatchKind,
    HeaderToAdd,
    PathMatch,
    QueryParameterMatcher,
    RedirectAction,
    RegexRewrite,
    RetryPolicy,
    Route,
    RouteAction,
    RouteActionType,
    RouteMatch,
    VirtualHost,
)
from ._routing import match_route, select_virtual_host
from ._type import ResourceType
from ._virtual_host import VirtualHostView, split_vhds_name, vhds_name

__all__ = [
    "BUILTIN_TYPES",
    "CLUSTER",
    "DEFAULT_ROUTE_TIMEOUT",
    "ENDPOINT",
    "KNOWN_HTTP_FILTERS",
    "LISTENER",
    "ROUTE_CONFIGURATION",
    "RUNTIME",
    "SCOPED_ROUTE_CONFIGURATION",
    "SECRET",
    "VIRTUAL_HOST",
    "ClusterLoadAssignmentView",
    "ClusterType",
    "ClusterView",
    "ClusterWeight",
    "CustomLbPolicy",
    "DirectResponse",
    "DownstreamTls",
    "DropOverload",
    "Endpoint",
    "EnvoyOutlierRules",
    "FilterChain",
    "FilterChainMatch",
    "HashPolicy",
    "HashPolicyKind",
    "HeaderAppendAction",
    "HeaderMatchKind",
    "HeaderMatcher",
    "HeaderToAdd",
    "HealthStatus",
    "HttpConnectionManager",
    "HttpFilter",
    "LbPolicy",
    "LeastRequest",
    "ListenerView",
    "Locality",
    "LocalityEndpoints",
    "OutlierDetection",
    "PathMatch",
    "PickFirst",
    "QueryParameterMatcher",
    "RedirectAction",
    "RegexRewrite",
    "ResourceDecodeError",
    "ResourceType",
    "RetryPolicy",
    "RingHash",
    "RoundRobin",
    "Route",
    "RouteAction",
    "RouteActionType",
    "RouteConfigurationView",
    "RouteMatch",
    "UpstreamTls",
    "VirtualHost",
    "VirtualHostView",
    "WeightedRoundRobin",
    "WrrLocality",
    "cluster_type",
    "http_route_matches",
    "listener_type",
    "match_http_route",
    "match_route",
    "redirect_location",
    "register_lb_policy_type",
    "rewrite_authority",
    "rewrite_path",
    "select_http_virtual_host",
    "select_virtual_host",
    "split_vhds_name",
    "unregister_lb_policy_type",
    "vhds_name",
]

for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type) and _obj.__module__.startswith("xdsclient.resources._"):
        _obj.__module__ = __name__
del _name, _obj
