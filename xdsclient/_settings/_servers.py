"""Management servers as configuration values: one server's URI, credentials and features.

Why apart from `_config`: a source (`_sources`) may be a server, and a client's configuration
holds sources; this module is below both, so neither imports the other back.
"""

from __future__ import annotations

from typing import Literal

import attrs

from .._errors import XdsError

__all__ = ["BootstrapError", "ChannelCredentials", "ServerConfig"]

#: The server feature of gRFC A88's transient resource timer, as the gRFC's states and as
#: C-core's bootstrap name it.
_TRANSIENT_TIMER_FEATURES = frozenset(
    {"resource_timer_is_transient_failure", "resource_timer_is_transient_error"}
)


class BootstrapError(XdsError):
    """The bootstrap configuration is invalid; the message names the offending field."""


@attrs.frozen(kw_only=True)
class ChannelCredentials:
    """How to secure the channel: ``insecure``, or ``tls`` with optional CA / client cert files."""

    type: Literal["insecure", "tls"] = "insecure"
    ca_certificate_file: str | None = None
    certificate_file: str | None = None
    private_key_file: str | None = None

    def __attrs_post_init__(self) -> None:
        if (self.certificate_file is None) != (self.private_key_file is None):
            raise BootstrapError("channel_creds: certificate_file and private_key_file go together")

    def __repr__(self) -> str:  # reprs end up in logs: name no file, show only the shape
        return f"ChannelCredentials(type={self.type!r}, mutual={self.certificate_file is not None})"


@attrs.frozen(kw_only=True, cache_hash=True)
class ServerConfig:
    """One management server: target URI, credentials and the server features it supports.

    Its hash is cached: the client routes every subscription through dicts keyed by server."""

    uri: str
    channel_credentials: ChannelCredentials = ChannelCredentials()
    server_features: frozenset[str] = frozenset()

    @property
    def ignore_resource_deletion(self) -> bool:
        """gRFC A53: keep resources the server deletes."""
        return "ignore_resource_deletion" in self.server_features

    @property
    def resource_timer_is_transient_failure(self) -> bool:
        """gRFC A88: the does-not-exist timer is 30 s and, when it fires, the resource is in
        status TIMEOUT with a transient error, not DOES_NOT_EXIST. Both spellings count:
        ``resource_timer_is_transient_failure`` (A88's states) and
        ``resource_timer_is_transient_error`` (the string gRPC C-core's bootstrap parses)."""
        return not self.server_features.isdisjoint(_TRANSIENT_TIMER_FEATURES)
