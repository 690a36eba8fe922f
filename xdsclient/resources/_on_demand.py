"""Which routes resolve their cluster at request time: Envoy's on-demand CDS as a pure rule.

Why here: it is read off the values (a listener's filters, a virtual host's and a route's
per-filter configs), so the dependency walk (which leaves such routes' clusters out of what it
walks ahead) and an HTTP front end (which resolves them per request) ask one function.

Rules (Envoy's on-demand filter, ``on_demand_update.cc``):
- ODCDS covers a route when the HttpConnectionManager runs the on-demand filter and its most
  specific config for the route carries ``odcds``: the route's ``typed_per_filter_config``
  under the filter's name, else the virtual host's, else the filter's own. A per-route config
  without ``odcds`` turns it off for that route. (Weighted clusters' and the route
  configuration's own per-filter configs are not consulted.)
- Its timeout is ``odcds.timeout``, Envoy's 5 s when unset. ``odcds.source`` and
  ``resources_locator`` are not read: on-demand clusters come from the client's own servers.
- A ``cluster_header`` route always resolves at request time (its cluster is named only then),
  with the ODCDS timeout when ODCDS covers it, else the same 5 s default.
"""

from __future__ import annotations

import functools

from envoy.extensions.filters.http.on_demand.v3 import on_demand_pb2

from ._listener import HttpConnectionManager, HttpFilter
from ._route_values import Route, VirtualHost

__all__ = [
    "DEFAULT_ODCDS_TIMEOUT",
    "ON_DEMAND_FILTER",
    "ON_DEMAND_PER_ROUTE",
    "odcds_timeout",
    "on_demand_filter",
    "request_time_timeout",
]

ON_DEMAND_FILTER = f"type.googleapis.com/{on_demand_pb2.OnDemand.DESCRIPTOR.full_name}"
ON_DEMAND_PER_ROUTE = f"type.googleapis.com/{on_demand_pb2.PerRouteConfig.DESCRIPTOR.full_name}"
#: Envoy's ``OnDemandCds.timeout`` default, seconds.
DEFAULT_ODCDS_TIMEOUT = 5.0


@functools.lru_cache(maxsize=256)
def _timeout_of(type_url: str, config: bytes) -> float | None:
    """The ODCDS timeout an OnDemand or PerRouteConfig (already validated) sets, or None when
    it carries no ``odcds``."""
    message_class = (
        on_demand_pb2.OnDemand if type_url == ON_DEMAND_FILTER else on_demand_pb2.PerRouteConfig
    )
    message = message_class.FromString(config)
    if not message.HasField("odcds"):
        return None
    if not message.odcds.HasField("timeout"):
        return DEFAULT_ODCDS_TIMEOUT
    timeout = message.odcds.timeout
    return float(timeout.seconds + timeout.nanos / 1e9)


def on_demand_filter(manager: HttpConnectionManager | None) -> HttpFilter | None:
    """The on-demand filter among ``manager``'s filters, or None."""
    if manager is None:
        return None
    for http_filter in manager.http_filters:
        if http_filter.type_url == ON_DEMAND_FILTER:
            return http_filter
    return None


def odcds_timeout(
    http_filter: HttpFilter | None, virtual_host: VirtualHost, route: Route
) -> float | None:
    """The ODCDS timeout when the on-demand filter ``http_filter`` (`on_demand_filter`; None
    when the listener runs none) covers ``route`` of ``virtual_host``, else None."""
    if http_filter is None:
        return None
    for configs in (route.typed_per_filter_config, virtual_host.typed_per_filter_config):
        entry = configs.get(http_filter.name)
        if entry is not None and entry[0] == ON_DEMAND_PER_ROUTE:
            return _timeout_of(entry[0], entry[1])
    return _timeout_of(http_filter.type_url, http_filter.config)


def request_time_timeout(
    manager: HttpConnectionManager | None, virtual_host: VirtualHost, route: Route
) -> float | None:
    """How long to resolve ``route``'s cluster at request time (a ``cluster_header`` route, or
    one ODCDS covers), or None when its clusters are walked ahead."""
    timeout = odcds_timeout(on_demand_filter(manager), virtual_host, route)
    action = route.action
    if timeout is None and action is not None and action.cluster_header:
        return DEFAULT_ODCDS_TIMEOUT
    return timeout
