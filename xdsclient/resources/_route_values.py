"""The values of a validated RouteConfiguration: frozen, slotted, keyword-only attrs classes.

Why apart from the decoder (`_route`): these are what a data plane reads, routes and matches
with, and they hold no protobuf; the decoder builds them, with its own slot-setting builders for
the three values every route has (`RouteMatch`, `RouteAction`, `Route`). Each condition knows
whether a request meets it (`HeaderMatcher.matches`, `RouteMatch.matches`); choosing among
virtual hosts and routes is `_routing`.

Invariants, as the decoder builds them: a `RouteMatch` with ``path_match`` SAFE_REGEX, and a
`HeaderMatcher` of kind safe_regex, carry the compiled RE2 ``regex`` (case-insensitive when the
match is); a range matcher carries ``range`` with start <= end; header names are lower-case.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Mapping
from typing import Any

import attrs

from ._regex import Regex

__all__ = [
    "ClusterWeight",
    "HashPolicy",
    "HashPolicyKind",
    "HeaderMatchKind",
    "HeaderMatcher",
    "PathMatch",
    "RetryPolicy",
    "Route",
    "RouteAction",
    "RouteActionType",
    "RouteMatch",
    "VirtualHost",
]


class PathMatch(enum.Enum):
    """How a route matches the path: by prefix, the whole path, or a regex (RE2)."""

    PREFIX = "prefix"
    PATH = "path"
    SAFE_REGEX = "safe_regex"


class HeaderMatchKind(enum.Enum):
    """How a header condition tests the header: its whole value, a regex (RE2), a numeric range
    [start, end), its presence, or a prefix, suffix or substring of its value."""

    EXACT = "exact"
    SAFE_REGEX = "safe_regex"
    RANGE = "range"
    PRESENT = "present"
    PREFIX = "prefix"
    SUFFIX = "suffix"
    CONTAINS = "contains"


@attrs.frozen(kw_only=True)
class HeaderMatcher:
    """One header condition of the given ``kind``; ``invert`` flips the result."""

    name: str
    kind: HeaderMatchKind
    value: str = ""
    range: tuple[int, int] | None = None
    present: bool = True
    invert: bool = False
    ignore_case: bool = False
    regex: Regex | None = attrs.field(default=None, eq=False, repr=False)

    def matches(self, headers: Mapping[str, str]) -> bool:
        """Whether ``headers`` meet this condition (a missing header never matches, inverted or
        not)."""
        value = headers.get(self.name)
        if self.kind is HeaderMatchKind.PRESENT:
            result = (value is not None) == self.present
        elif value is None:
            return False  # a missing header never matches, inverted or not (gRFC A28)
        else:
            result = self._matches_value(value)
        return result != self.invert

    def _matches_value(self, value: str) -> bool:
        if self.kind is HeaderMatchKind.RANGE:
            assert self.range is not None
            try:
                number = int(value)
            except ValueError:
                return False
            return self.range[0] <= number < self.range[1]
        if self.kind is HeaderMatchKind.SAFE_REGEX:
            assert self.regex is not None
            return self.regex.fullmatch(value) is not None
        subject, pattern = (
            (value.lower(), self.value.lower()) if self.ignore_case else (value, self.value)
        )
        if self.kind is HeaderMatchKind.EXACT:
            return subject == pattern
        if self.kind is HeaderMatchKind.PREFIX:
            return subject.startswith(pattern)
        if self.kind is HeaderMatchKind.SUFFIX:
            return subject.endswith(pattern)
        return pattern in subject  # CONTAINS


@attrs.frozen(kw_only=True)
class RouteMatch:
    """What a request must look like for a route to apply."""

    path_match: PathMatch
    path: str
    case_sensitive: bool = True
    headers: tuple[HeaderMatcher, ...] = ()
    #: Share of requests that match, parts per million (None: all of them).
    runtime_fraction_ppm: int | None = None
    regex: Regex | None = attrs.field(default=None, eq=False, repr=False)

    def matches(self, path: str, headers: Mapping[str, str], roll_ppm: int | None = None) -> bool:
        """Whether a request for ``path`` with ``headers`` matches (``roll_ppm`` in [0, 1e6)
        decides the runtime fraction; random when None)."""
        if not self._path_matches(path):
            return False
        if not all(header.matches(headers) for header in self.headers):
            return False
        if self.runtime_fraction_ppm is not None:
            roll = random.randrange(1_000_000) if roll_ppm is None else roll_ppm
            return roll < self.runtime_fraction_ppm
        return True

    def _path_matches(self, path: str) -> bool:
        if self.path_match is PathMatch.SAFE_REGEX:
            assert self.regex is not None
            return self.regex.fullmatch(path) is not None
        subject, pattern = (
            (path, self.path) if self.case_sensitive else (path.lower(), self.path.lower())
        )
        if self.path_match is PathMatch.PREFIX:
            return subject.startswith(pattern)
        return subject == pattern  # PATH


@attrs.frozen(kw_only=True)
class ClusterWeight:
    """One cluster of a weighted split: its name, its weight and its per-filter config overrides."""

    name: str
    weight: int
    typed_per_filter_config: Mapping[str, Any] = attrs.field(factory=dict, hash=False)


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """gRFC A44: which status codes to retry, how often, with what backoff (seconds)."""

    retry_on: frozenset[str]
    num_retries: int = 1
    base_interval: float = 0.025
    max_interval: float = 0.25


class HashPolicyKind(enum.Enum):
    """What a ring-hash policy hashes (gRFC A42)."""

    HEADER = "header"  #: a request header, optionally rewritten by a regex
    CHANNEL_ID = "channel_id"  #: the channel (filter state ``io.grpc.channel_id``)


@attrs.frozen(kw_only=True)
class HashPolicy:
    """gRFC A42: hash on a header (optionally rewritten) or on the channel id."""

    kind: HashPolicyKind
    header_name: str = ""
    regex: Regex | None = attrs.field(default=None, eq=False)
    substitution: str = ""
    terminal: bool = False


class RouteActionType(enum.Enum):
    """What a route does with the requests it matches."""

    ROUTE = "route"  #: forward to a cluster
    NON_FORWARDING = "non_forwarding"  #: server side: handled locally
    UNSUPPORTED = "unsupported"  #: redirect, direct response...: RPCs matching it fail


@attrs.frozen(kw_only=True)
class RouteAction:
    """Where a matched request goes and how."""

    cluster: str = ""
    weighted_clusters: tuple[ClusterWeight, ...] = ()
    cluster_specifier_plugin: str = ""
    #: max_stream_duration.grpc_timeout_header_max, else max_stream_duration (seconds)
    max_stream_duration: float | None = None
    retry_policy: RetryPolicy | None = None
    hash_policies: tuple[HashPolicy, ...] = ()

    @property
    def clusters(self) -> tuple[str, ...]:
        """Every cluster this action can send to."""
        if self.cluster:
            return (self.cluster,)
        return tuple(w.name for w in self.weighted_clusters)


@attrs.frozen(kw_only=True)
class Route:
    """One route: what it matches, what it does (``action`` when it forwards to clusters), and its
    per-filter config overrides."""

    match: RouteMatch
    action_type: RouteActionType
    action: RouteAction | None = None
    typed_per_filter_config: Mapping[str, Any] = attrs.field(factory=dict, hash=False)


@attrs.frozen(kw_only=True)
class VirtualHost:
    """The routes of a set of domains, in order, with the host's retry policy and per-filter
    config overrides."""

    name: str
    domains: tuple[str, ...]
    routes: tuple[Route, ...]
    retry_policy: RetryPolicy | None = None
    typed_per_filter_config: Mapping[str, Any] = attrs.field(factory=dict, hash=False)
