"""Real listeners and route configurations for the call-path tests, validated by the library's
own decoders (the views the call path reads)."""

from __future__ import annotations

import random
from typing import Any

from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2
from envoy.extensions.filters.http.fault.v3 import fault_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.type.v3 import percent_pb2

from xdsclient._call import HTTP_RULES, ActiveFaults, CallConfig, CallPlan, CallRequest
from xdsclient.resources import ListenerView, RouteConfigurationView

RLS_TYPE = "type.googleapis.com/grpc.lookup.v1.RouteLookupClusterSpecifier"


def route_config(name: str = "routes", *, domains: tuple[str, ...] = ("*",)) -> Any:
    """An empty RouteConfiguration with one virtual host ``vh`` for ``domains``."""
    message = route_pb2.RouteConfiguration(name=name)
    message.virtual_hosts.add(name="vh", domains=list(domains))
    return message


def add_route(vhost: Any, prefix: str = "", cluster: str | None = "c") -> Any:
    """A route matching ``prefix`` to ``cluster`` (None: no action set yet)."""
    route = vhost.routes.add()
    route.match.prefix = prefix
    if cluster is not None:
        route.route.cluster = cluster
    return route


def fault(
    *,
    abort_grpc: int | None = None,
    abort_http: int | None = None,
    header_abort: bool = False,
    abort_percent: tuple[int, int] | None = None,
    delay_s: float | None = None,
    header_delay: bool = False,
    delay_percent: tuple[int, int] | None = None,
    max_active: int | None = None,
) -> Any:
    """An HTTPFault; percentages are (numerator, denominator enum: 0 hundred, 1 ten thousand,
    2 million)."""
    message = fault_pb2.HTTPFault()
    if abort_grpc is not None:
        message.abort.grpc_status = abort_grpc
    if abort_http is not None:
        message.abort.http_status = abort_http
    if header_abort:
        message.abort.header_abort.SetInParent()
    if abort_percent is not None:
        message.abort.percentage.CopyFrom(
            percent_pb2.FractionalPercent(numerator=abort_percent[0], denominator=abort_percent[1])
        )
    if delay_s is not None:
        message.delay.fixed_delay.FromNanoseconds(int(delay_s * 1e9))
    if header_delay:
        message.delay.header_delay.SetInParent()
    if delay_percent is not None:
        message.delay.percentage.CopyFrom(
            percent_pb2.FractionalPercent(numerator=delay_percent[0], denominator=delay_percent[1])
        )
    if max_active is not None:
        message.max_active_faults.value = max_active
    return message


def listener(
    routes: Any | None = None,
    *,
    name: str = "svc",
    rds: str = "routes",
    faults: tuple[Any, ...] = (),
    max_stream_duration_s: float | None = None,
) -> Any:
    """An API listener with inline ``routes`` (else RDS ``rds``), fault filters named
    ``fault0``, ``fault1``... before the router."""
    manager = hcm_pb2.HttpConnectionManager()
    if routes is not None:
        manager.route_config.CopyFrom(routes)
    else:
        manager.rds.route_config_name = rds
        manager.rds.config_source.ads.SetInParent()
    for i, config in enumerate(faults):
        manager.http_filters.add(name=f"fault{i}").typed_config.Pack(config)
    manager.http_filters.add(name="router").typed_config.Pack(router_pb2.Router())
    if max_stream_duration_s is not None:
        manager.common_http_protocol_options.max_stream_duration.FromNanoseconds(
            int(max_stream_duration_s * 1e9)
        )
    message = listener_pb2.Listener(name=name)
    message.api_listener.api_listener.Pack(manager)
    return message


def config(
    routes: Any, *, inline: bool = True, faults: tuple[Any, ...] = (), **kwargs: Any
) -> CallConfig:
    """The validated call config of ``routes``, inline in the listener or by RDS."""
    if inline:
        view = ListenerView.from_proto(listener(routes, faults=faults, **kwargs))
        return CallConfig.from_listener(view)
    view = ListenerView.from_proto(listener(rds=routes.name, faults=faults, **kwargs))
    return CallConfig.from_listener(view, RouteConfigurationView.from_proto(routes))


def override(config: Any) -> Any:
    """A typed_per_filter_config entry holding ``config``."""
    packed = route_components_pb2.FilterConfig()
    packed.config.Pack(config)
    return packed


def call(
    path: str = "/pkg.Svc/Method",
    *,
    authority: str = "svc",
    metadata: tuple[tuple[str, str], ...] = (),
    deadline: float | None = None,
    channel_id: int = 7,
) -> CallRequest:
    return CallRequest(
        authority=authority,
        path=path,
        metadata=metadata,
        deadline=deadline,
        channel_id=channel_id,
    )


def http(
    path: str = "/",
    *,
    authority: str = "example.com",
    headers: tuple[tuple[str, str], ...] = (),
    deadline: float | None = None,
    method: str = "GET",
    scheme: str = "http",
    source_ip: str | None = None,
) -> CallRequest:
    """An HTTP request as the httpx transport describes it (headers as sent)."""
    return CallRequest(
        authority=authority,
        path=path,
        metadata=headers,
        deadline=deadline,
        method=method,
        scheme=scheme,
        source_ip=source_ip,
        grpc_rules=False,
    )


def http_plan(
    routes: Any,
    request: CallRequest | None = None,
    *,
    inline: bool = False,
    faults: tuple[Any, ...] = (),
    active: ActiveFaults | None = None,
    now: float = 0.0,
    seed: int = 0,
) -> CallPlan:
    """The plan of ``request`` under Envoy's HTTP rules, the routes by RDS unless ``inline``."""
    return CallPlan.begin(
        request or http(),
        config(routes, inline=inline, faults=faults),
        now=now,
        rng=random.Random(seed),
        faults=active if active is not None else ActiveFaults(),
        rules=HTTP_RULES,
    )
