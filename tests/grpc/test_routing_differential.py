"""`XdsChannel`'s routing against grpcio's own ``xds:///`` channel: weighted clusters, header and
path matching, with one control plane and real backends named after their clusters.

Why: gRFC A28 decides where a call goes and C-core is its reference; each call is made on both
channels and must land on the same backend (the weighted split within a statistical bound of
the weights on both)."""

from __future__ import annotations

import collections
from typing import Any

from xdsclient.testing import ControlPlane, builders

from .differential import Call, both
from .echo import cluster_of, echo_backends

#: (route, cluster): tried in order; each matches every path unless it says otherwise
ROUTES = [
    "canary",  # header x-env exact "canary"
    "gold",  # header x-tier prefix "gold"
    "binary",  # header x-trace-bin present: never matches (gRPC skips -bin headers)
    "nonnumeric",  # header x-user not matching [0-9]+ (inverted); an absent header never matches
    "ctype",  # content-type exact application/grpc, and header x-ct present
    "exact",  # path exact /echo.Echo/Say, header x-path "exact"
    "nocase",  # prefix /ECHO.ECHO/S not case sensitive, header x-path "nocase"
    "regex",  # path regex /echo\.Echo/S[a-z]y, header x-path "regex"
    "wrongcase",  # prefix /ECHO.ECHO/S case sensitive, header x-path "wrongcase": never
    "default",
]


def _routing(clusters: dict[str, Any]) -> list[Any]:
    routes = builders.route_configuration("routing-routes", {})
    vhost = routes.virtual_hosts[0]
    for name in ROUTES:
        route = vhost.routes.add()
        route.route.cluster = name
        match = route.match
        match.prefix = "/"
        header = match.headers.add
        if name == "canary":
            header(name="x-env").string_match.exact = "canary"
        elif name == "gold":
            header(name="x-tier").string_match.prefix = "gold"
        elif name == "binary":
            header(name="x-trace-bin").present_match = True
        elif name == "nonnumeric":
            inverted = header(name="x-user", invert_match=True)
            inverted.string_match.safe_regex.regex = "[0-9]+"
        elif name == "ctype":
            header(name="content-type").string_match.exact = "application/grpc"
            header(name="x-ct").present_match = True
        elif name in ("exact", "nocase", "regex", "wrongcase"):
            header(name="x-path").string_match.exact = name
            if name == "exact":
                match.path = "/echo.Echo/Say"
            elif name == "regex":
                match.safe_regex.regex = r"/echo\.Echo/S[a-z]y"
            else:
                match.prefix = "/ECHO.ECHO/S"
                match.case_sensitive.value = name == "wrongcase"
    resources = [builders.api_listener("routing"), routes]
    for name, backend in clusters.items():
        resources += cluster_of(name, [backend])
    return resources


CASES: list[tuple[tuple[tuple[str, str], ...], str]] = [
    ((), "default"),
    ((("x-env", "canary"),), "canary"),
    ((("x-env", "prod"),), "default"),
    ((("x-tier", "golden"),), "gold"),
    ((("x-tier", "silver"),), "default"),
    ((("x-trace-bin", "AAEC"),), "default"),
    ((("x-user", "alice"),), "nonnumeric"),
    ((("x-user", "42"),), "default"),
    ((("x-ct", "1"),), "ctype"),
    ((("x-path", "exact"),), "exact"),
    ((("x-path", "nocase"),), "nocase"),
    ((("x-path", "regex"),), "regex"),
    ((("x-path", "wrongcase"),), "default"),
    ((("x-env", "canary"), ("x-tier", "gold")), "canary"),
    ((("x-tier", "gold"), ("x-user", "bob")), "gold"),
]


async def test_header_and_path_routes_send_each_call_to_the_backend_grpcio_does(
    plane: ControlPlane,
) -> None:
    """Exact, prefix, regex, present and inverted header matches, a ``-bin`` header (never
    matched), ``content-type``, exact, regex and case-insensitive paths: every call lands on
    the backend grpcio's channel sends it to, the route A28 picks."""
    async with echo_backends(*ROUTES) as backends:
        plane.set_all(_routing(dict(zip(ROUTES, backends, strict=True))))
        calls = [Call(listener="routing", metadata=metadata) for metadata, _ in CASES]
        theirs, ours = await both(plane, calls)
    assert [r.backend for r in theirs] == [expected for _, expected in CASES], theirs
    assert [r.backend for r in ours] == [r.backend for r in theirs], ours


SPLIT = {"light": 25, "heavy": 75}
SPLIT_CALLS = 400


async def test_weighted_clusters_split_calls_by_weight_as_grpcio_does(
    plane: ControlPlane,
) -> None:
    """A route splitting 25/75 between two clusters: over 400 calls each channel sends the
    light cluster's share within four standard deviations of 25%."""
    async with echo_backends(*SPLIT) as backends:
        routes = builders.route_configuration("split-routes", SPLIT)
        resources = [builders.api_listener("split"), routes]
        for name, backend in zip(SPLIT, backends, strict=True):
            resources += cluster_of(name, [backend])
        plane.set_all(resources)
        theirs, ours = await both(plane, [Call(listener="split")] * SPLIT_CALLS)
    share = SPLIT["light"] / sum(SPLIT.values())
    bound = 4 * (SPLIT_CALLS * share * (1 - share)) ** 0.5
    for side in (theirs, ours):
        counts = collections.Counter(r.backend for r in side)
        assert set(counts) == set(SPLIT), counts
        assert abs(counts["light"] - SPLIT_CALLS * share) <= bound, counts
