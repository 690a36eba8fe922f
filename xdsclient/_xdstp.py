"""xdstp:// resource names (xDS TP1, gRFC A47): parse, check against a type, print canonically.

Why a value type: a new-style name is a key in the cache, a routing decision (its authority
picks the servers) and a string on the wire. Two spellings of one name (context parameters in
another order, another percent-encoding of the same characters) must be one key, so every
xdstp name the client is given is parsed once at the API boundary and replaced by its canonical
form: context parameters sorted by key (a repeated key keeps its last value), every component
percent-encoded the same way. The names a response gives go through the same `canonical_name`
(the protocol's classify step), so a server spelling a name otherwise still reaches its
watchers.

The canonical form is byte for byte the name gRPC C-core (grpcio) requests: C-core parses a
name as a URI (decoding every component) and prints it again with its `URI::ToString`, which
percent-encodes only what RFC 3986 does not allow where the text stands:
- authority: unreserved, sub-delims and ``:[]`` stay (``@`` is encoded);
- path (``/type/id``): unreserved, sub-delims, ``:@/`` stay (``?`` and ``#`` are encoded);
- a context parameter's key or value: the query characters (unreserved, sub-delims, ``:@/?``)
  but ``&`` and ``=``, which delimit the parameters;
- an empty authority is printed without ``//``: ``xdstp:/{type}/{id}`` (C-core's URI printer;
  ``xdstp:///{type}/{id}`` is read as the same name).
grpc-go differs in two corners (it escapes ``!'()*,;`` in paths, and prints ``xdstp:///`` for
an empty authority); C-core is the reference here.

Format: ``xdstp://{authority}/{type}/{id}?{key=value&...}``; the authority may be empty, the id
may contain ``/``. Processing directives (``#...``, deprecated in TP1) are refused: no client
implements them and dropping them silently would change the name.
"""

from __future__ import annotations

import re
import urllib.parse

import attrs

from ._errors import XdsError

__all__ = [
    "XDSTP_PREFIX",
    "XDSTP_SCHEME",
    "InvalidNameError",
    "XdstpName",
    "canonical_name",
    "encode_authority",
    "expand_template",
    "is_xdstp",
]

XDSTP_SCHEME = "xdstp://"
#: What makes a name new-style (C-core: ``absl::StartsWith(name, "xdstp:")``).
XDSTP_PREFIX = "xdstp:"
_TYPE_PREFIX = "type.googleapis.com/"

# RFC 3986 characters that stay unencoded in each component, as C-core's uri.cc classes them
# (besides the unreserved ones, which urllib.parse.quote never encodes).
_SUB_DELIMS = "!$&'()*+,;="
_AUTHORITY_SAFE = _SUB_DELIMS + ":[]"  # IsAuthorityChar
_PATH_SAFE = _SUB_DELIMS + ":@/"  # IsPathChar: a segment's pchar, and '/'
_QUERY_SAFE = "!$'()*+,;" + ":@/?"  # IsQueryKeyOrValueChar: no '&' or '='
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
#: A name that is already canonical and has no context: an authority, a type and an id of
#: characters that print as themselves (no ``%``, ``?`` or ``#``; no ``@`` in the authority).
#: `canonical_name` takes it as it is (a response of thousands of names parses none).
_PLAIN = re.compile(
    r"xdstp://[\w\-.~!$&'()*+,;=:\[\]]+/([\w\-.~!$&'()*+,;=:@]+)/[\w\-.~!$&'()*+,;=:@/]+", re.ASCII
)


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
        if name.startswith(XDSTP_SCHEME):
            rest = name[len(XDSTP_SCHEME) :]
        elif name.startswith(XDSTP_PREFIX + "/"):  # no authority: C-core's form of an empty one
            rest = name[len(XDSTP_PREFIX) :]
        else:
            raise InvalidNameError(f"{name!r} is not an xdstp:// name")
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
        authority = f"//{encode_authority(self.authority)}" if self.authority else ""
        text = f"{XDSTP_PREFIX}{authority}/{_quote(f'{self.resource_type}/{self.id}', _PATH_SAFE)}"
        if self.context:
            text += "?" + "&".join(
                f"{_quote(k, _QUERY_SAFE)}={_quote(v, _QUERY_SAFE)}" for k, v in self.context
            )
        return text

    @property
    def type_url(self) -> str:
        """The type URL of ``resource_type`` (``type.googleapis.com/`` and the message name)."""
        return _TYPE_PREFIX + self.resource_type


def is_xdstp(name: str) -> bool:
    """Whether ``name`` is a new-style (xdstp) name."""
    return name.startswith(XDSTP_PREFIX)


def canonical_name(name: str, type_url: str) -> str:
    """``name`` itself when old-style; an xdstp name checked against ``type_url`` and put in
    canonical form. Raises `InvalidNameError` for a malformed name or one of another type."""
    if not name.startswith(XDSTP_PREFIX):
        return name
    plain = _PLAIN.fullmatch(name)
    if plain is not None and type_url == _TYPE_PREFIX + plain.group(1):
        return name
    parsed = XdstpName.parse(name)
    if parsed.type_url != type_url:
        raise InvalidNameError(
            f"{name!r} names a resource of type {parsed.resource_type}, "
            f"not {type_url.removeprefix(_TYPE_PREFIX)}"
        )
    return str(parsed)


def expand_template(template: str, target: str) -> str:
    """gRFC A47: replace ``%s`` in a listener name template by ``target``, percent-encoded as
    a URI path (C-core's `URI::PercentEncodePath`: ``/`` and every pchar kept) when the
    template is an xdstp name."""
    if template.startswith(XDSTP_PREFIX):
        target = _quote(target, _PATH_SAFE)
    return template.replace("%s", target)


def encode_authority(authority: str) -> str:
    """``authority`` percent-encoded as the authority of a URI (C-core's
    `URI::PercentEncodeAuthority`)."""
    return _quote(authority, _AUTHORITY_SAFE)


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
