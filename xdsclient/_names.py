"""Names with a protocol meaning.

Why: one place for the strings every layer compares; a typo in one of them is silent on the wire.
The type URLs of resource types come from their `ResourceType`, derived from the protobuf
descriptor, so they are not repeated here.
"""

from __future__ import annotations

import urllib.parse

__all__ = ["OLD_AUTHORITY", "RESOURCE_WRAPPER_TYPE_URL", "WILDCARD", "authority_of"]

#: Resources wrapped in ``envoy.service.discovery.v3.Resource`` inside a SotW response.
RESOURCE_WRAPPER_TYPE_URL = "type.googleapis.com/envoy.service.discovery.v3.Resource"

#: The explicit wildcard subscription name.
WILDCARD = "*"

#: The authority of old-style (non-xdstp) names, as gRPC C-core calls it (gRFC A47).
OLD_AUTHORITY = "#old"

_XDSTP = "xdstp:"


def authority_of(name: str) -> str:
    """The authority of a resource name: ``xdstp://authority/type/id`` -> ``authority``
    (``xdstp:/type/id``, C-core's spelling of an empty one -> ``""``); an old-style name ->
    `OLD_AUTHORITY`."""
    if not name.startswith(_XDSTP):
        return OLD_AUTHORITY
    if not name.startswith("//", 6):
        return ""
    authority = name[8:].split("/", 1)[0]
    return urllib.parse.unquote(authority) if "%" in authority else authority
