"""The one exception hierarchy of xdsclient.

Why: users catch one root (`XdsError`) and can still tell a *local* problem (we rejected what the
server sent, our own timer fired, the caller misused the API) from a *remote* one (the server
told us about an error, the stream failed). Errors double as values: the protocol core hands them
to watchers inside events instead of raising them, so every error carries the resource it is
about where there is one.
"""

from __future__ import annotations

__all__ = [
    "ClientClosedError",
    "MissingExtraError",
    "ProtocolError",
    "ResourceDecodeError",
    "ResourceDoesNotExistError",
    "ResourceError",
    "ResourceExpiredError",
    "ResourceTimeoutError",
    "ResourceValidationError",
    "ServerResourceError",
    "TransportError",
    "WaitTimeoutError",
    "XdsError",
]


class XdsError(Exception):
    """Root of every error xdsclient raises or reports."""


class ClientClosedError(XdsError, RuntimeError):
    """Local: the `XdsClient` was closed; it watches and answers nothing any more."""


class WaitTimeoutError(XdsError, TimeoutError):
    """Local: `XdsClient.wait_for` saw no value satisfying its predicate in time."""


class MissingExtraError(XdsError, ImportError):
    """Local: a feature needs an optional extra that is not installed (the message names it)."""


class ProtocolError(XdsError):
    """The protocol core was driven in a way its state does not allow (a local bug)."""


class ResourceDecodeError(XdsError):
    """A decoder could not turn serialized bytes into a valid resource.

    Raised by `ResourceType` decoders. ``name`` is the resource name when the decoder got far
    enough to know it, so the rejection can be attributed to that one resource (gRFC A46).
    """

    def __init__(self, message: str, *, name: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.name = name


class ResourceError(XdsError):
    """An error about one resource, identified by its type URL and name.

    ``version``: the version of the update that caused it, when one did (a rejected resource's
    version, the version of the response that deleted it), as CSDS reports it in
    ``error_state.version_info``; empty otherwise.
    """

    def __init__(self, type_url: str, name: str, message: str, *, version: str = "") -> None:
        super().__init__(f'{_short_type(type_url)} "{name}": {message}')
        self.type_url = type_url
        self.name = name
        self.message = message
        self.version = version


class ResourceValidationError(ResourceError):
    """Local: the server sent this resource but it failed decoding or validation (it was NACKed).

    ``version``: the rejected version (SotW: the response's ``version_info``; Delta: the
    resource's).
    """


class ResourceDoesNotExistError(ResourceError):
    """Remote: the server said the resource does not exist (deleted, removed, or sent empty)."""


class ResourceTimeoutError(ResourceDoesNotExistError):
    """Local: the does-not-exist timer fired before the server sent the resource (gRFC A57)."""


class ResourceExpiredError(ResourceError):
    """Local: the resource's TTL ran out without a refresh, so it was removed from the cache."""


class ServerResourceError(ResourceError):
    """Remote: the server reported an error for this resource in ``resource_errors`` (gRFC A88).

    ``code`` is the google.rpc code; NOT_FOUND (5) and PERMISSION_DENIED (7) are data errors that
    drop any cached value, every other code is transient and keeps it.
    """

    def __init__(self, type_url: str, name: str, message: str, *, code: int) -> None:
        super().__init__(type_url, name, message)
        self.code = code

    @property
    def is_data_error(self) -> bool:
        """True when the error invalidates the resource instead of leaving the cached one usable."""
        return self.code in (5, 7)


class TransportError(XdsError):
    """Remote: the stream to the management server failed (connectivity, RPC status, limits).

    ``code`` is the gRPC status name (``"UNAVAILABLE"``...) when the stream ended with one.
    """

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


def _short_type(type_url: str) -> str:
    return type_url.rsplit(".", 1)[-1] if type_url else "resource"
