"""An answer the call path gives itself, without an upstream response: `LocalReply`.

Why a value: an HTTP front end answers some requests locally, as Envoy's router does (no
virtual host or route: 404; ``direct_response``; ``redirect``; a fault abort; a timeout: 504;
no cluster or a reset: 503), and the decision is made here, synchronously; the front end only
turns it into a response. Every local answer this library makes for a reason of its own (not
one the configuration asked for, as a direct response or a redirect is) names that reason in
the ``x-xdsclient-error`` header (`ERROR_HEADER`), as well as in the body when Envoy's has
none.
"""

from __future__ import annotations

import attrs

from ._status import Code

__all__ = ["ERROR_HEADER", "LocalReply", "code_of_http"]

#: The response header naming why the call path answered a request itself.
ERROR_HEADER = "x-xdsclient-error"


@attrs.frozen(kw_only=True)
class LocalReply:
    """The response to answer with: an HTTP ``status``, a ``body`` and ``headers`` (lower-case
    names, in order)."""

    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def error(cls, status: int, reason: str, body: bytes | None = None) -> LocalReply:
        """A local answer for ``reason``: named in `ERROR_HEADER`, and the body (``reason``
        and a newline unless ``body`` is given)."""
        text = reason.encode("utf-8", "replace") + b"\n" if body is None else body
        return cls(status=status, body=text, headers=((ERROR_HEADER, _header_safe(reason)),))


def _header_safe(text: str) -> str:
    """``text`` as a header value: printable ASCII, anything else as ``?``."""
    return "".join(c if " " <= c <= "~" else "?" for c in text)


def code_of_http(status: int) -> Code:
    """The code an HTTP response counts as for load reports and outlier detection: OK below
    500 (Envoy counts only 5xx as errors), gRPC's HTTP mapping for a 5xx (never OK)."""
    if status < 500:
        return Code.OK
    return Code.UNAVAILABLE if status in (502, 503, 504) else Code.UNKNOWN
