"""Options of the protocol core.

Why a value: the shell builds these once from the client's configuration; the core only reads
them, so every behaviour they switch is visible in one place.
"""

from __future__ import annotations

import attrs

from .._validators import positive

__all__ = ["ProtocolOptions"]


@attrs.frozen(kw_only=True)
class ProtocolOptions:
    """How the protocol core behaves where the xDS spec leaves a choice."""

    #: Seconds after the request naming a resource was sent before its timer fires (gRFC A57;
    #: the spec recommends 15 s, gRFC A88 30 s with ``resource_timer_is_transient_failure``).
    does_not_exist_timeout: float = attrs.field(default=15.0, validator=positive)
    #: Keep resources the server deletes, reporting the deletion once (gRFC A53 server feature).
    ignore_resource_deletion: bool = False
    #: The does-not-exist timer firing means a slow server, not a missing resource: status
    #: TIMEOUT and a transient error (UNAVAILABLE) instead of DOES_NOT_EXIST (gRFC A88 server
    #: feature ``resource_timer_is_transient_failure``; the shell also makes the timer 30 s).
    resource_timer_is_transient_failure: bool = False
    #: Longest ``error_detail.message`` a NACK carries; longer lists of errors are cut short.
    #: Error texts a server reports are cut to this length too.
    max_nack_message_length: int = attrs.field(default=4096, validator=positive)
    #: A response with more resources is NACKed whole, nothing in it applied (a hostile-server
    #: bound; 1,000,000 is far above any real deployment).
    max_resources_per_response: int = attrs.field(default=1_000_000, validator=positive)
    #: A resource whose name is longer is rejected (its name is not stored).
    max_name_length: int = attrs.field(default=4096, validator=positive)
    #: Every response is the complete state of its type, whatever the type, and a subscribed
    #: name absent from it does not exist (a file source: nothing is in flight).
    complete_state: bool = False
