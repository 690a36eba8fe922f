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

    #: Seconds after the request naming a resource was sent before it is declared missing
    #: (gRFC A57; the spec recommends 15 s).
    does_not_exist_timeout: float = attrs.field(default=15.0, validator=positive)
    #: Keep resources the server deletes, reporting the deletion once (gRFC A53 server feature).
    ignore_resource_deletion: bool = False
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
