"""The deadline a call runs under: its own, capped by the route's max stream duration (gRFC A31).

Why: gRPC applies xDS's ``max_stream_duration`` as the method config's timeout, which only ever
shortens the caller's deadline. Which duration applies is C-core's (``XdsResolver::
RouteConfigData``): the route action's ``max_stream_duration.grpc_timeout_header_max`` if set,
else its ``max_stream_duration.max_stream_duration`` (the decoder picked one of the two), else
the HTTP connection manager's ``common_http_protocol_options.max_stream_duration``; a duration
of 0 means no limit. The cap counts from the call's start (``now``), on the caller's clock.
"""

from __future__ import annotations

from ..resources import HttpConnectionManager, RouteAction

__all__ = ["capped_deadline", "max_stream_duration"]


def max_stream_duration(action: RouteAction, hcm: HttpConnectionManager) -> float | None:
    """The duration that caps a call on this route, in seconds; None: no cap."""
    duration = action.max_stream_duration
    if duration is None:
        duration = hcm.max_stream_duration
    if not duration:
        return None
    return duration


def capped_deadline(deadline: float | None, now: float, duration: float | None) -> float | None:
    """The earlier of the call's ``deadline`` and ``now + duration`` (None: no deadline)."""
    if duration is None:
        return deadline
    cap = now + duration
    return cap if deadline is None else min(deadline, cap)
