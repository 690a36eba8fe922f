"""xdstp:// resource names (xDS TP1, gRFC A47): parse, check against a type, print canonically.

Why a value type: a new-style name is a key in the cache, a routing decision (its authority
picks the servers) and a string on the wire. Two spellings of one name (context parameters in
another order, another percent-encoding of the same characters) must be one key, so every
xdstp name the client is given is parsed once at the API boundary and replaced by its canonical
form: context parameters sorted by key (a repeated key keeps its last value, as gRPC does),
every component percent-encoded the same way.

Format: ``xdstp://{authority}/{type}/{id}?{key=value&...}``; the authority may be empty, the id
may contain ``/``. Processing directives (``#...``, deprecated in TP1) are refused: no client
implements them and dropping them silently would change the name.
"""

from __future__ import annotations

import re
import urllib.parse

import attrs

from ._errors import XdsError

__all__ = ["XDSTP_SCHEME", "InvalidNameError", "XdstpName", "canonical_name", "expand_template"]

XDSTP_SCHEME = "xdstp://"
_TYPE_PREFIX = "type.googleapis.com/"

# RFC 3986 characters that may stand unencoded in each component (besides unreserved ones,
# which urllib.parse.quote never encodes).
_SUB_DELIMS = "!$'()*+,;"  # '&' and '=' delimit context parameters, so they are always encoded
_AUTHORITY_SAFE = _SUB_DELIMS + ":@"  # reg-name, with userinfo and port characters
_SEGMENT_SAFE = _SUB_DELIMS + ":@"
_ID_SAFE = _SEGMENT_SAFE + "/"
_QUERY_SAFE = _SUB_DELIMS + ":@/?"
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


class InvalidNameError(XdsError, ValueError):
    """A resource name that is not a valid xdstp:// name, or not of the expected type."""


@attrs.frozen
class XdstpName:
    """A parsed xdstp:// name. ``str(name)`` is its canonical form."""

    authority: str
    resource_type: str  #: the message's full name, e.g. ``envoy.config.listener.v3.Listener``
    id: str
    context: tuple[tuple[str, str], ...] = ()  #: context parameters, sorted by key

    @classmethod
    def parse(cls, name: str) -> XdstpName:
        """Parse ``name``; raises `InvalidNameError` saying what is wrong."""
        if not name.startswith(XDSTP_SCHEME):
            raise InvalidNameError(f"{name!r} is not an xdstp:// name")
        rest = name[len(XDSTP_SCHEME) :]
        if "#" in rest:
            raise InvalidNameError(
                f"{name!r}: processing directives ('#...') are not supported in resource names"
            )
        path, _, query = rest.partition("?")
        authority, slash, path = path.partition("/")
        resource_type, slash2, id_ = path.partition("/")
        if not slash or not resource_type:
            raise InvalidNameError(f"{name!r}: no resource type (xdstp://authority/type/id)")
        if not slash2 or not id_:
            raise InvalidNameError(f"{name!r}: no resource id (xdstp://authority/type/id)")
        return cls(
            authority=_decode(authority, name),
            resource_type=_decode(resource_type, name),
            id=_decode(id_, name),
            context=_context(query, name),
        )

    def __str__(self) -> str:
        text = (
            f"{XDSTP_SCHEME}{_quote(self.authority, _AUTHORITY_SAFE)}/"
            f"{_quote(self.resource_type, _SEGMENT_SAFE)}/{_quote(self.id, _ID_SAFE)}"
        )
        if self.context:
            text += "?" + "&".join(
                f"{_quote(k, _QUERY_SAFE)}={_quote(v, _QUERY_SAFE)}" for k, v in self.context
            )
        return text

    @property
    def type_url(self) -> str:
        """The type URL of ``resource_type`` (``type.googleapis.com/`` and the message name)."""
        return _TYPE_PREFIX + self.resource_type


def canonical_name(name: str, type_url: str) -> str:
    """``name`` itself when old-style; an xdstp name checked against ``type_url`` and put in
    canonical form. Raises `InvalidNameError` for a malformed name or one of another type."""
    if not name.startswith(XDSTP_SCHEME):
        return name
    parsed = XdstpName.parse(name)
    if parsed.type_url != type_url:
        raise InvalidNameError(
            f"{name!r} names a resource of type {parsed.resource_type}, "
            f"not {type_url.removeprefix(_TYPE_PREFIX)}"
        )
    return str(parsed)


def expand_template(template: str, target: str) -> str:
    """gRFC A47: replace ``%s`` in a listener name template by ``target``, percent-encoded
    (``/`` kept) when the template is an xdstp:// name."""
    if template.startswith("xdstp:"):
        target = _quote(target, _ID_SAFE)
    return template.replace("%s", target)


def _quote(text: str, safe: str) -> str:
    return urllib.parse.quote(text, safe=safe)


def _decode(text: str, name: str) -> str:
    if _BAD_ESCAPE.search(text):
        raise InvalidNameError(f"{name!r}: bad percent-encoding in {text!r}")
    try:
        return urllib.parse.unquote(text, errors="strict")
    except UnicodeDecodeError:
        raise InvalidNameError(f"{name!r}: percent-encoding in {text!r} is not UTF-8") from None


def _context(query: str, name: str) -> tuple[tuple[str, str], ...]:
    params: dict[str, str] = {}
    for pair in query.split("&") if query else ():
        key, eq, value = pair.partition("=")
        if not key or not eq:
            raise InvalidNameError(f"{name!r}: context parameter {pair!r} is not key=value")
        params[_decode(key, name)] = _decode(value, name)  # a repeated key keeps its last value
    return tuple(sorted(params.items()))
