"""What a call is routed by, per listener: `CallConfig`, the same for both front ends.

Why apart: the plan, the rules and the front ends all read it; the front end builds one per
configuration snapshot, and every call routed by that snapshot shares it.
"""

from __future__ import annotations

import attrs

from ..resources import HttpConnectionManager, ListenerView, RouteConfigurationView
from ._fault import FAULT_FILTER_TYPE

__all__ = ["CallConfig"]


@attrs.frozen(kw_only=True)
class CallConfig:
    """What a call is routed by: the listener's HTTP connection manager and, when its routes
    come from RDS, the RouteConfiguration it names."""

    listener_name: str
    hcm: HttpConnectionManager
    route_config: RouteConfigurationView | None = None
    #: whether the listener runs a fault filter (most do not: their calls skip fault work)
    has_fault_filters: bool = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        faulty = any(f.type_url == FAULT_FILTER_TYPE for f in self.hcm.http_filters)
        object.__setattr__(self, "has_fault_filters", faulty)

    @classmethod
    def from_listener(
        cls, listener: ListenerView, route_config: RouteConfigurationView | None = None
    ) -> CallConfig:
        """The config of a client (API) listener."""
        if listener.api_listener is None:
            raise ValueError(f"listener {listener.name!r} is not a client (API) listener")
        return cls(
            listener_name=listener.name, hcm=listener.api_listener, route_config=route_config
        )
