"""ClientOptions: every setting of the client as one frozen value.

Why one value: the constructor stays readable, options can be built once and shared between
clients (a load test makes thousands), and every behaviour they switch is listed in one place.
The protocol core's own options (`ProtocolOptions`) and the transport's are derived from it.
"""

from __future__ import annotations

import attrs

from .._protocol import ProtocolOptions
from .._validators import positive
from ._config import Backoff

__all__ = ["ClientOptions"]

_DEFAULT_MAX_RECEIVE = 256 * 1024 * 1024


@attrs.frozen(kw_only=True)
class ClientOptions:
    """How an `XdsClient` talks to its servers and treats what they send.

    ``ads`` (one aggregated stream, the default) or one stream per type; ``delta`` for the
    incremental variant. ``does_not_exist_timeout`` is gRFC A57's timer;
    ``transient_resource_timeout`` replaces it for a server with the
    ``resource_timer_is_transient_failure`` feature (gRFC A88: 30 s).
    ``max_receive_message_length`` defaults far above gRPC's 4 MiB, which a 14k-cluster SotW
    response exceeds. ``max_resources_per_response`` and ``max_name_length`` bound what a hostile
    server can make the client hold (a response over the first is NACKed whole; a resource whose
    name exceeds the second is rejected). ``keepalive_time`` (seconds between pings; None: off)
    notices a silent connection. ``slow_watcher_threshold``: a watcher callback running longer
    is logged by name. ``on_demand_grace``: how long a name `XdsClient.resolve` subscribed to
    stays subscribed after its last resolve finished, when nothing else watches it (30 s: a
    burst of requests for one cluster resolves once; docs/on-demand.md).
    """

    ads: bool = True
    delta: bool = False
    does_not_exist_timeout: float = attrs.field(default=15.0, validator=positive)
    transient_resource_timeout: float = attrs.field(default=30.0, validator=positive)
    max_resources_per_response: int = attrs.field(default=1_000_000, validator=positive)
    max_name_length: int = attrs.field(default=4096, validator=positive)
    max_nack_message_length: int = attrs.field(default=4096, validator=positive)
    max_receive_message_length: int = attrs.field(default=_DEFAULT_MAX_RECEIVE, validator=positive)
    keepalive_time: float | None = attrs.field(
        default=None, validator=attrs.validators.optional(positive)
    )
    keepalive_timeout: float = attrs.field(default=20.0, validator=positive)
    backoff: Backoff = attrs.field(factory=Backoff)
    slow_watcher_threshold: float = attrs.field(default=1.0, validator=positive)
    on_demand_grace: float = attrs.field(default=30.0, validator=positive)

    def protocol(
        self,
        *,
        ignore_resource_deletion: bool,
        complete_state: bool = False,
        resource_timer_is_transient_failure: bool = False,
    ) -> ProtocolOptions:
        """The protocol core's options for a server (server features vary by server) or a
        source (a file is the complete state)."""
        return ProtocolOptions(
            does_not_exist_timeout=self.transient_resource_timeout
            if resource_timer_is_transient_failure
            else self.does_not_exist_timeout,
            ignore_resource_deletion=ignore_resource_deletion,
            resource_timer_is_transient_failure=resource_timer_is_transient_failure,
            complete_state=complete_state,
            max_nack_message_length=self.max_nack_message_length,
            max_resources_per_response=self.max_resources_per_response,
            max_name_length=self.max_name_length,
        )
