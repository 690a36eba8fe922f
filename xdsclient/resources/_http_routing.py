"""Envoy's HTTP routing rules over validated route values: pure functions an HTTP front end calls
per request.

Why beside `_routing` and not in it: gRPC's rules are C-core's and stay exactly so (a wildcard
matches the empty string, query parameter routes are skipped, ``case_sensitive`` applies to a
regex); Envoy's router differs in each of those, so each front end reads its own rules over the
same values. What each function follows, from Envoy's route configuration reference
(``config.route.v3``) and router (``source/common/router/config_impl.cc``):

- `select_http_virtual_host`: the authority, lower-cased, is looked up as an exact domain,
  then suffix wildcards (``*.foo.com``, ``*-bar.foo.com``) longest first, then prefix
  wildcards (``foo.*``) longest first, then ``*``; a wildcard never matches the empty string
  (``*.foo.com`` does not match ``.foo.com``). The port is part of the authority and so of the
  match (``www.host.com:443`` does not match ``www.host.com``) unless the route configuration's
  ``ignore_port_in_host_matching`` is set (``ignore_port``); the connection manager's
  ``strip_any_host_port`` and ``strip_matching_host_port`` (both off by default) rewrite the
  authority before routing, which is the caller's to do.
- `http_route_matches` / `match_http_route`: routes in order (`VirtualHost.http_routes`: also
  those with query parameter conditions); ``prefix`` tests the whole ``:path`` (query
  included), ``path``, ``safe_regex`` and ``path_separated_prefix`` the path without its query
  and fragment; ``case_sensitive`` applies to prefix, path and path_separated_prefix, not to a
  regex; then the runtime fraction (one roll per request, for every route), the headers (every
  matcher, inverted or not: a missing header matches only an absent-matcher) and the query
  parameters (the first value of each, percent-decoded).
- `rewrite_path`, `rewrite_authority`, `redirect_location`: the action's ``prefix_rewrite``
  (the matched prefix, or the whole path for a path or regex match, replaced) or
  ``regex_rewrite`` (every match in the path without its query replaced, the query kept),
  ``host_rewrite_literal``, and the Location of a redirect.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping
from urllib.parse import parse_qsl

from ._regex import Regex, compile_regex
from ._route_values import (
    PathMatch,
    RedirectAction,
    RegexRewrite,
    Route,
    RouteAction,
    RouteMatch,
    VirtualHost,
)

__all__ = [
    "http_route_matches",
    "match_http_route",
    "query_parameters",
    "redirect_location",
    "rewrite_authority",
    "rewrite_path",
    "select_http_virtual_host",
    "strip_port",
]

_PPM = 1_000_000
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def strip_port(authority: str) -> str:
    """``authority`` without its port, if it has one (``[::1]:80`` -> ``[::1]``; a bare IPv6
    address is left whole)."""
    if authority.startswith("["):
        end = authority.find("]")
        return authority[: end + 1] if end >= 0 else authority
    host, colon, port = authority.rpartition(":")
    if colon and port.isdigit() and ":" not in host:
        return host
    return authority


def select_http_virtual_host(
    virtual_hosts: tuple[VirtualHost, ...], authority: str, *, ignore_port: bool = False
) -> VirtualHost | None:
    """The virtual host Envoy's router picks for ``authority`` (the module docstring's rules);
    among equal domains, the first virtual host that has it."""
    host = (strip_port(authority) if ignore_port else authority).lower()
    best: tuple[int, int] | None = None  # (kind: lower is better, -wildcard length)
    chosen = None
    for vhost in virtual_hosts:
        for domain in vhost.domains:
            rank = _domain_rank(domain.lower(), host)
            if rank is not None and (best is None or rank < best):
                best, chosen = rank, vhost
    return chosen


def _domain_rank(pattern: str, host: str) -> tuple[int, int] | None:
    """How well ``pattern`` matches ``host`` (None: not at all)."""
    if pattern == "*":
        return (3, 0)
    if pattern.startswith("*"):
        rest = pattern[1:]
        matched = len(rest) < len(host) and host.endswith(rest)
        return (1, -len(rest)) if matched else None
    if pattern.endswith("*"):
        rest = pattern[:-1]
        matched = len(rest) < len(host) and host.startswith(rest)
        return (2, -len(rest)) if matched else None
    return (0, 0) if pattern == host else None


def query_parameters(path: str) -> dict[str, str]:
    """The query parameters of ``path`` (``:path``), percent-decoded: name -> its first
    value."""
    _, question, query = path.partition("?")
    params: dict[str, str] = {}
    if question:
        for name, value in parse_qsl(query.partition("#")[0], keep_blank_values=True):
            params.setdefault(name, value)
    return params


def _path_only(path: str) -> str:
    """``path`` without its query and fragment."""
    end = len(path)
    for mark in ("?", "#"):
        at = path.find(mark)
        if 0 <= at < end:
            end = at
    return path[:end]


@functools.lru_cache(maxsize=256)
def _case_sensitive_regex(pattern: str) -> Regex:
    return compile_regex(pattern)


def _path_matches(match: RouteMatch, path: str) -> bool:
    kind = match.path_match
    if kind is PathMatch.SAFE_REGEX:  # Envoy ignores case_sensitive for a regex
        regex = match.regex if match.case_sensitive else None
        compiled = regex if regex is not None else _case_sensitive_regex(match.path)
        return compiled.fullmatch(_path_only(path)) is not None
    subject = path if kind is PathMatch.PREFIX else _path_only(path)
    pattern = match.path
    if not match.case_sensitive:
        subject, pattern = subject.lower(), pattern.lower()
    if kind is PathMatch.PREFIX:
        return subject.startswith(pattern)
    if kind is PathMatch.PATH_SEPARATED_PREFIX:
        return subject.startswith(pattern) and (
            len(subject) == len(pattern) or subject[len(pattern)] == "/"
        )
    return subject == pattern  # PATH


def http_route_matches(
    match: RouteMatch, path: str, headers: Mapping[str, str], roll_ppm: int
) -> bool:
    """Whether a request for ``path`` (``:path``, query included) with ``headers`` (lower-case
    names; repeated headers joined by ``,``) meets ``match`` by Envoy's rules, ``roll_ppm`` in
    [0, 1e6) deciding its runtime fraction."""
    if not _path_matches(match, path):
        return False
    if match.runtime_fraction_ppm is not None and roll_ppm >= match.runtime_fraction_ppm:
        return False
    if not all(header.matches(headers) for header in match.headers):
        return False
    if match.query_parameters:
        params = query_parameters(path)
        return all(condition.matches(params) for condition in match.query_parameters)
    return True


def match_http_route(
    virtual_host: VirtualHost,
    path: str,
    headers: Mapping[str, str] | None = None,
    roll_ppm: int | None = None,
) -> Route | None:
    """The first of ``virtual_host``'s `VirtualHost.http_routes` matching a request by Envoy's
    rules (``roll_ppm``: the request's one roll for every runtime fraction; random when None)."""
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    roll = random.randrange(_PPM) if roll_ppm is None else roll_ppm
    for route in virtual_host.http_routes:
        if http_route_matches(route.match, path, lowered, roll):
            return route
    return None


def _rewritten(
    match: RouteMatch, prefix_rewrite: str, regex_rewrite: RegexRewrite | None, path: str
) -> str | None:
    """``path`` (``:path``) with a prefix or regex rewrite applied; None when there is none."""
    just_path, query = _path_only(path), path[len(_path_only(path)) :]
    if prefix_rewrite:
        if match.path_match in (PathMatch.PREFIX, PathMatch.PATH_SEPARATED_PREFIX):
            return prefix_rewrite + path[len(match.path) :]
        return prefix_rewrite + query  # a path or regex match: the whole path was matched
    if regex_rewrite is not None:
        return regex_rewrite.regex.sub(regex_rewrite.substitution, just_path) + query
    return None


def rewrite_path(route: Route, path: str) -> str:
    """The ``:path`` to forward ``path`` with by ``route``'s action (``prefix_rewrite``, else
    ``regex_rewrite``; ``path`` itself when it has neither)."""
    action = route.action
    if action is None:
        return path
    rewritten = _rewritten(route.match, action.prefix_rewrite, action.regex_rewrite, path)
    return path if rewritten is None else rewritten


def rewrite_authority(action: RouteAction, authority: str) -> str:
    """The authority to forward with: ``host_rewrite_literal`` when set, else ``authority``."""
    return action.host_rewrite_literal or authority


def redirect_location(
    redirect: RedirectAction, match: RouteMatch, scheme: str, authority: str, path: str
) -> str:
    """The Location a redirecting route answers a request (``scheme``, ``authority``,
    ``:path``) with: each part the redirect sets replaces the request's (a new port replaces the
    authority's, and the scheme's default port is left out), the path by ``path_redirect`` (its
    own query, if it has one, replaces the request's), ``prefix_rewrite`` or ``regex_rewrite``;
    ``strip_query`` drops the request's query."""
    new_scheme = (redirect.scheme or scheme).lower()
    host = redirect.host or authority
    if redirect.port:
        host = f"{strip_port(host)}:{redirect.port}"
    elif redirect.scheme and redirect.scheme != scheme.lower():
        host = strip_port(host)  # the old port belongs to the old scheme
    bare = strip_port(host)
    if host != bare and host[len(bare) + 1 :] == _DEFAULT_PORTS.get(new_scheme):
        host = bare
    query = path[len(_path_only(path)) :]
    if redirect.strip_query:
        query = ""
    if redirect.path:
        new_path = redirect.path if "?" in redirect.path else redirect.path + query
    else:
        rewritten = _rewritten(match, redirect.prefix_rewrite, redirect.regex_rewrite, path)
        new_path = path if rewritten is None else rewritten
        if redirect.strip_query:
            new_path = _path_only(new_path)
    return f"{new_scheme}://{host}{new_path}"
