"""The common route configuration read straight from its wire bytes: the compiled RDS decoder.

Why: a full load decodes one route configuration of a route per cluster (1,000 routes at
N=1,000), and nearly every route a control plane sends gRPC has one shape: a prefix or a path,
forwarding to one named cluster, perhaps with a name. Through upb that is a parse, then per
route a few accessor calls and three values built slot by slot from Python (the short path of
`_route`), about 3 us a route; compiled with mypyc (the wheels, ``make compiled``), this module
checks those few fields on the bytes, the whole configuration before it builds anything (so one
it declines late costs a scan, not values thrown away), then builds the same values from C,
with no Python call per route but the slot setters'. Interpreted it is slower than upb and the
short path, so the decoder uses it only when it is compiled (`COMPILED`).

It takes only that shape: a RouteConfiguration of a ``name``, ``virtual_hosts``, perhaps
``validate_clusters`` (a BoolValue gRPC ignores) and ``ignore_port_in_host_matching``; each
virtual host a ``name``, valid ``domains`` (at least one), ``routes`` and perhaps
``include_request_attempt_count`` (ignored); each route a ``match`` of a ``prefix`` or a
``path`` alone, a ``route`` action of a non-empty ``cluster`` alone, perhaps a ``name`` and a
``decorator`` naming an operation (both of which gRPC ignores but the name, which the view
keeps). At anything else (another field, a singular field given twice, an unexpected wire type,
invalid UTF-8, an invalid domain, bytes that do not parse) it returns None, raising nothing, and
upb and the full reader decide, so it never changes a verdict or a NACK's text:
tests/resources/test_route_wire.py holds what it accepts to the full reader's view on fixed,
generated, mutated and byte-edited configurations, interpreted and compiled.

The values' module (`_route`) lends the classes, their slot setters and the shared values with
`bind_views`, and `decode` is handed the upb decoder (`_route` imports this module, not the
other way round): a compiled module cannot define the attrs classes itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # compiled, positions and bytes are native 64-bit integers; plain int as Python
    from mypy_extensions import i64

from .._wire import NO, span, text, varint

__all__ = ["COMPILED", "bind_views", "decode", "read"]

#: Whether this module runs compiled (mypyc), not from its source file.
COMPILED: Final = not __file__.endswith(".py")

_object_new: Final = object.__new__


class _Lent:
    """What `bind_views` lent: the classes, the slot setters of RouteMatch (7), RouteAction (12)
    and Route (9) in field order, and the shared values (PathMatch PREFIX and PATH,
    RouteActionType ROUTE, the empty mapping). An object's fields, not module globals:
    compiled, reading them is no dict lookup."""

    def __init__(self) -> None:
        self.config: Any = None
        self.virtual_host: Any = None
        self.match: Any = None
        self.action: Any = None
        self.route: Any = None
        self.match_setters: tuple[Any, ...] = ()
        self.action_setters: tuple[Any, ...] = ()
        self.route_setters: tuple[Any, ...] = ()
        self.prefix: Any = None
        self.path: Any = None
        self.forward: Any = None
        self.no_configs: Any = None


_LENT: Final = _Lent()


# Every reader below takes the message's bytes and the bounds of the part it reads. None of them
# raises at what it leaves to upb: it returns a position of -1 (`NO`; the primitives of `_wire` do
# the same) or None, as compiled a raised exception costs more than reading many common routes.


def _one_varint(data: bytes, pos: i64, end: i64) -> bool:
    """Whether the message is at most one varint field numbered 1 (a BoolValue)."""
    if pos == end:
        return True
    if data[pos] != 0x08:
        return False
    _, pos = varint(data, pos + 1, end)
    return pos == end


def _utf8(data: bytes, start: i64, stop: i64) -> bool:
    """Whether the text is valid UTF-8 (upb rejects it otherwise): ASCII checked byte by byte,
    with no allocation; anything else decoded."""
    pos = start
    while pos < stop:
        if data[pos] >= 0x80:
            return text(data, start, stop) is not None
        pos += 1
    return True


def _one_text(data: bytes, pos: i64, end: i64) -> bool:
    """Whether the message is at most one valid UTF-8 string numbered 1 (a Decorator's
    operation)."""
    if pos == end:
        return True
    if data[pos] != 0x0A:
        return False
    start, stop = span(data, pos + 1, end)
    return start >= 0 and stop == end and _utf8(data, start, stop)


def _match(data: bytes, pos: i64, end: i64) -> tuple[i64, i64]:
    """A RouteMatch of a prefix (field 1) or a path (field 2) alone: the text's (start, end),
    its start negated minus one for a path; (-1, -1) for anything else."""
    if pos >= end:
        return NO, NO
    key: i64 = data[pos]
    if key != 0x0A and key != 0x12:
        return NO, NO
    start, stop = span(data, pos + 1, end)
    if start < 0 or stop != end or not _utf8(data, start, stop):
        return NO, NO
    return (start if key == 0x0A else -2 - start), stop


def _cluster(data: bytes, pos: i64, end: i64) -> tuple[i64, i64]:
    """A RouteAction of a non-empty cluster (field 1) alone: the name's (start, end); (-1, -1)
    for anything else."""
    if pos >= end or data[pos] != 0x0A:
        return NO, NO
    start, stop = span(data, pos + 1, end)
    if start < 0 or stop != end or start == stop or not _utf8(data, start, stop):
        return NO, NO
    return start, stop


def _route(data: bytes, pos: i64, end: i64, build: bool) -> Any:
    """The common route's value, built through the lent slot setters (True when not
    ``build``ing: checked only); None for any other."""
    path_at: i64 = NO
    path_end: i64 = NO
    cluster_at: i64 = NO
    cluster_end: i64 = NO
    name_at: i64 = 0
    name_end: i64 = 0
    seen: i64 = 0
    while pos < end:
        key: i64 = data[pos]
        bit: i64 = 1 << (key >> 3)
        if key >= 0x80 or key & 7 != 2 or seen & bit:
            return None  # a field numbered 16 or more, not length-delimited, or given twice
        seen |= bit
        start, pos = span(data, pos + 1, end)
        if start < 0:
            return None
        if key == 0x0A:  # match (1)
            path_at, path_end = _match(data, start, pos)
            if path_end < 0:
                return None
        elif key == 0x12:  # route (2)
            cluster_at, cluster_end = _cluster(data, start, pos)
            if cluster_at < 0:
                return None
        elif key == 0x72:  # name (14)
            if not _utf8(data, start, pos):
                return None
            name_at, name_end = start, pos
        elif key == 0x2A:  # decorator (5): an operation alone, which gRPC ignores
            if not _one_text(data, start, pos):
                return None
        else:
            return None
    if path_end < 0 or cluster_at < 0:
        return None
    if not build:
        return True
    prefix = path_at >= 0
    if not prefix:
        path_at = -2 - path_at
    return _new_route(
        data[path_at:path_end].decode(),
        prefix,
        data[cluster_at:cluster_end].decode(),
        data[name_at:name_end].decode() if name_end > name_at else "",
    )


def _new_route(path: str, prefix: bool, cluster: str, name: str) -> Any:
    """The three values of `_route._common_route`, through their slots."""
    lent = _LENT
    m_kind, m_path, m_case, m_headers, m_fraction, m_regex, m_query = lent.match_setters
    match = _object_new(lent.match)
    m_kind(match, lent.prefix if prefix else lent.path)
    m_path(match, path)
    m_case(match, True)
    m_headers(match, ())
    m_fraction(match, None)
    m_regex(match, None)
    m_query(match, ())
    (
        a_cluster,
        a_weighted,
        a_plugin,
        a_duration,
        a_retry,
        a_hashes,
        a_prefix_rewrite,
        a_regex_rewrite,
        a_host_rewrite,
        a_timeout,
        a_http_hashes,
        a_cluster_header,
    ) = lent.action_setters
    action = _object_new(lent.action)
    a_cluster(action, cluster)
    a_weighted(action, ())
    a_plugin(action, "")
    a_duration(action, None)
    a_retry(action, None)
    a_hashes(action, ())
    a_prefix_rewrite(action, "")
    a_regex_rewrite(action, None)
    a_host_rewrite(action, "")
    a_timeout(action, None)
    a_http_hashes(action, ())
    a_cluster_header(action, "")
    r_match, r_type, r_action, r_configs, r_name, r_redirect, r_direct, r_add, r_remove = (
        lent.route_setters
    )
    route = _object_new(lent.route)
    r_match(route, match)
    r_type(route, lent.forward)
    r_action(route, action)
    r_configs(route, lent.no_configs)
    r_name(route, name)
    r_redirect(route, None)
    r_direct(route, None)
    r_add(route, ())
    r_remove(route, ())
    return route


def _valid_domain(data: bytes, start: i64, stop: i64) -> bool:
    """As `_route._valid_domain` (C-core's classes) on the UTF-8 bytes: ``*``, ``*suffix``,
    ``prefix*`` or exact without ``*`` (a byte of a multi-byte character is never ``*``)."""
    if start == stop:
        return False
    if data[start] == 0x2A or data[stop - 1] == 0x2A:
        return True
    pos = start
    while pos < stop:
        if data[pos] == 0x2A:
            return False
        pos += 1
    return True


def _virtual_host(data: bytes, pos: i64, end: i64, build: bool) -> Any:
    """The common virtual host's value (True when not ``build``ing: checked only); None for
    any other (or an invalid one)."""
    name_at: i64 = NO
    name_end: i64 = NO
    flagged = False
    domains: list[str] = []
    routes: list[Any] = []
    while pos < end:
        key: i64 = data[pos]
        if key == 0x70 and not flagged:  # include_request_attempt_count (14): gRPC ignores it
            flagged = True
            _, pos = varint(data, pos + 1, end)
            if pos < 0:
                return None
            continue
        if key != 0x0A and key != 0x12 and key != 0x1A:
            return None
        start, pos = span(data, pos + 1, end)
        if start < 0:
            return None
        if key == 0x1A:  # routes (3)
            route = _route(data, start, pos, build)
            if route is None:
                return None
            if build:
                routes.append(route)
        elif key == 0x12:  # domains (2)
            if build:
                domains.append(data[start:pos].decode())
            elif _valid_domain(data, start, pos) and _utf8(data, start, pos):
                domains.append("")  # counted only
            else:
                return None
        elif name_at >= 0 or not _utf8(data, start, pos):  # name (1), given twice or invalid
            return None
        else:
            name_at, name_end = start, pos
    if not domains:
        return None  # the full reader rejects it
    if not build:
        return True
    kept = tuple(routes)
    no_configs = _LENT.no_configs
    return _LENT.virtual_host(
        name=data[name_at:name_end].decode() if name_at >= 0 else "",
        domains=tuple(domains),
        routes=kept,
        retry_policy=None,
        typed_per_filter_config=no_configs,
        http_routes=kept,
        request_headers_to_add=(),
        request_headers_to_remove=(),
    )


def _configuration(data: bytes, end: i64, build: bool) -> tuple[str, tuple[Any, ...], bool] | None:
    """(name, virtual hosts, ignore_port_in_host_matching) of a common route configuration
    (no virtual hosts when not ``build``ing: checked only); None for anything else."""
    name_at: i64 = 0
    name_end: i64 = 0
    ignore_port = False
    seen: i64 = 0
    hosts: list[Any] = []
    pos: i64 = 0
    while pos < end:
        key: i64 = data[pos]
        bit: i64 = 1 << (key >> 3)
        if key == 0x12:  # virtual_hosts (2)
            start, pos = span(data, pos + 1, end)
            if start < 0:
                return None
            host = _virtual_host(data, start, pos, build)
            if host is None:
                return None
            if build:
                hosts.append(host)
            continue
        if key >= 0x80 or seen & bit:
            return None
        seen |= bit
        if key == 0x70:  # ignore_port_in_host_matching (14): a bool
            value, pos = varint(data, pos + 1, end)
            if pos < 0 or value > 1:
                return None
            ignore_port = value == 1
            continue
        if key != 0x0A and key != 0x3A:  # name (1), validate_clusters (7)
            return None
        start, pos = span(data, pos + 1, end)
        if start < 0:
            return None
        if key == 0x0A:
            if not _utf8(data, start, pos):
                return None
            name_at, name_end = start, pos
        elif not _one_varint(data, start, pos):
            return None
    name = data[name_at:name_end].decode() if build and name_end > name_at else ""
    return name, tuple(hosts), ignore_port


def read(data: bytes) -> tuple[str, tuple[Any, ...], bool] | None:
    """(name, virtual hosts, ignore_port_in_host_matching) of a common route configuration, or
    None: upb decides."""
    if _configuration(data, len(data), False) is None:
        return None
    return _configuration(data, len(data), True)


def bind_views(
    classes: tuple[type, type, type, type, type],
    setters: tuple[tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]],
    common: tuple[Any, Any, Any, Any],
) -> None:
    """Lend `decode` the classes (RouteConfigurationView, VirtualHost, RouteMatch, RouteAction,
    Route), the slot setters of the last three (in field order) and the shared values (PathMatch
    PREFIX, PathMatch PATH, RouteActionType ROUTE, the empty mapping)."""
    counts = tuple(len(each) for each in setters)
    if counts != (7, 12, 9):
        raise ValueError(f"the values have {counts} fields, the reader sets (7, 12, 9)")
    lent = _LENT
    lent.config, lent.virtual_host, lent.match, lent.action, lent.route = classes
    lent.match_setters, lent.action_setters, lent.route_setters = setters
    lent.prefix, lent.path, lent.forward, lent.no_configs = common


def decode(fallback: Callable[[bytes], tuple[str, Any]], data: bytes) -> tuple[str, Any]:
    """The ROUTE_CONFIGURATION decoder of the compiled build: bytes -> (name, view), the
    common configuration's view built here; ``fallback`` (upb and the full reader) for the
    rest."""
    end = len(data)
    # checked whole before anything is built: a configuration declined at its last route
    # costs a scan of its bytes, not the values of every route before it
    found = _configuration(data, end, False)
    if found is not None:
        found = _configuration(data, end, True)
    if found is None:
        return fallback(data)
    name, hosts, ignore_port = found
    view = _LENT.config(
        name=name,
        virtual_hosts=hosts,
        cluster_specifier_plugins={},
        raw=data,
        ignore_port_in_host_matching=ignore_port,
        request_headers_to_add=(),
        request_headers_to_remove=(),
    )
    return name, view
