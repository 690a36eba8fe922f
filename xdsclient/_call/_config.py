"""What a call is routed by, per listener: `CallConfig`, the same for both front ends.

Why apart: the plan, the rules and the front ends all read it; the front end builds one per
configuration snapshot, and every call routed by that snapshot shares it.
"""

from __future__ import annotations

import attrs

from ..resources import HttpConnectionManager, ListenerView, RouteConfigurationView, VirtualHost
from ._fault import FAULT_FILTER_TYPE
from ._route import Router

__all__ = ["CallConfig"]


@attrs.frozen(kw_only=True)
class CallConfig:
    """What a call is routed by: the listener's HTTP connection manager and, when its routes
    come from RDS, the RouteConfiguration it names; the virtual host when the configuration
    chose it (a snapshot's, which VHDS may have brought), else each call's authority selects
    one from the routes."""

    listener_name: str
    hcm: HttpConnectionManager
    route_config: RouteConfigurationView | None = None
    virtual_host: VirtualHost | None = None
    #: whether the listener runs a fault filter (most do not: their calls skip fault work)
    has_fault_filters: bool = attrs.field(init=False, eq=False, repr=False)
    #: gRPC's routing of this configuration, its answers remembered while it lasts
    router: Router = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        faulty = any(f.type_url == FAULT_FILTER_TYPE for f in self.hcm.http_filters)
        object.__setattr__(self, "has_fault_filters", faulty)
        router = Router(
            self.hcm,
            listener_name=self.listener_name,
            route_config=self.route_config,
            virtual_host=self.virtual_host,
        )
        object.__setattr__(self, "router", router)

    @classmethod
    def from_listener(
        cls,
        listener: ListenerView,
        route_config: RouteConfigurationView | None = None,
        virtual_host: VirtualHost | None = None,
    ) -> CallConfig:
        """The config of a client (API) listener."""
        if listener.api_listener is None:
            raise ValueError(f"listener {listener.name!r} is not a client (API) listener")
        return cls(
            listener_name=listener.name,
            hcm=listener.api_listener,
            route_config=route_config,
            virtual_host=virtual_host,
        )
