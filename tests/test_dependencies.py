"""The pure dependency walk: every graph shape, without a server."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.extensions.clusters.aggregate.v3 import cluster_pb2 as aggregate_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import cluster, endpoints, listener, routes
from tests.fuzz import examples
from xdsclient import ResourceDoesNotExistError, ResourceState, ResourceStatus, XdsError
from xdsclient._watch import _dependencies
from xdsclient._watch._dependencies import (
    ClusterConfig,
    XdsConfig,
    _eds_entry,
    endpoint_users,
    rewalk_endpoints,
    walk,
)
from xdsclient.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE_CONFIGURATION, ResourceType

L, R, C, E = LISTENER.type_url, ROUTE_CONFIGURATION.type_url, CLUSTER.type_url, ENDPOINT.type_url


class Cache:
    """What the walk reads: type URL, name -> state."""

    def __init__(self) -> None:
        self.states: dict[tuple[str, str], ResourceState] = {}

    def put(self, rtype: ResourceType[Any], message: Any) -> None:
        name, view = rtype.decode(message.SerializeToString())
        self.states[(rtype.type_url, name)] = _state(
            rtype.type_url, name, ResourceStatus.ACKED, view
        )

    def missing(self, type_url: str, name: str) -> None:
        error = ResourceDoesNotExistError(type_url, name, "the server says it does not exist")
        self.states[(type_url, name)] = _state(
            type_url, name, ResourceStatus.DOES_NOT_EXIST, None, error
        )

    def lookup(self, type_url: str, name: str) -> ResourceState | None:
        return self.states.get((type_url, name))


def _state(
    type_url: str, name: str, status: ResourceStatus, value: Any, error: XdsError | None = None
) -> ResourceState:
    return ResourceState(
        type_url=type_url,
        name=name,
        status=status,
        value=value,
        version="1" if value is not None else None,
        last_updated=0.0,
        error=error,
        error_time=None,
        expires_at=None,
    )


def aggregate(name: str, *children: str) -> Any:
    message = cluster_pb2.Cluster(name=name)
    message.cluster_type.name = "envoy.clusters.aggregate"
    message.cluster_type.typed_config.Pack(aggregate_pb2.ClusterConfig(clusters=list(children)))
    return message


def full(cache: Cache, *names: str) -> None:
    for name in names:
        cache.put(CLUSTER, cluster(name))
        cache.put(ENDPOINT, endpoints(name))


def test_rds_to_clusters_to_endpoints_gives_a_complete_snapshot() -> None:
    cache = Cache()
    cache.put(LISTENER, listener("l"))
    cache.put(ROUTE_CONFIGURATION, routes("a", "b"))
    full(cache, "a", "b")
    result = walk("l", "svc.example.com", cache.lookup)
    assert result.wanted == {(L, "l"), (R, "routes"), (C, "a"), (C, "b"), (E, "a"), (E, "b")}
    config = result.config
    assert config is not None
    assert not isinstance(config, XdsError)
    assert config.listener.name == "l"
    assert config.route_config.name == "routes"
    assert config.virtual_host.name == "vh"
    assert sorted(config.clusters) == ["a", "b"]
    a = config.clusters["a"]
    assert a.ok
    assert a.endpoints is not None
    assert a.endpoints.name == "a"
    assert a.leaves == ("a",)


def test_nothing_is_published_while_anything_is_pending_but_everything_needed_is_known() -> None:
    cache = Cache()
    assert walk("l", "x", cache.lookup).config is None
    cache.put(LISTENER, listener("l"))
    cache.put(ROUTE_CONFIGURATION, routes("a", "b"))
    cache.put(CLUSTER, cluster("a"))
    result = walk("l", "x", cache.lookup)
    assert result.config is None
    # Both clusters are asked for at once, and a's endpoints as soon as a is known.
    assert result.wanted == {(L, "l"), (R, "routes"), (C, "a"), (C, "b"), (E, "a")}


def test_inline_routes_need_no_rds() -> None:
    cache = Cache()
    from envoy.config.listener.v3 import listener_pb2
    from envoy.extensions.filters.http.router.v3 import router_pb2
    from envoy.extensions.filters.network.http_connection_manager.v3 import (
        http_connection_manager_pb2 as hcm_pb2,
    )

    manager = hcm_pb2.HttpConnectionManager()
    manager.route_config.CopyFrom(routes("a"))
    manager.http_filters.add(name="router").typed_config.Pack(router_pb2.Router())
    message = listener_pb2.Listener(name="l")
    message.api_listener.api_listener.Pack(manager)
    cache.put(LISTENER, message)
    full(cache, "a")
    result = walk("l", "x", cache.lookup)
    assert (R, "routes") not in result.wanted
    assert result.config is not None
    assert not isinstance(result.config, XdsError)
    assert list(result.config.clusters) == ["a"]


def test_shared_and_weighted_clusters_are_walked_once() -> None:
    cache = Cache()
    cache.put(LISTENER, listener("l"))
    cache.put(ROUTE_CONFIGURATION, routes("a", {"a": 1, "b": 3}, "b"))
    full(cache, "a", "b")
    config = walk("l", "x", cache.lookup).config
    assert config is not None
    assert not isinstance(config, XdsError)
    assert list(config.clusters) == ["a", "b"]


def _aggregate_cache(*clusters: Any, leaves: tuple[str, ...] = ()) -> Cache:
    cache = Cache()
    cache.put(LISTENER, listener("l"))
    cache.put(ROUTE_CONFIGURATION, routes("root"))
    for message in clusters:
        cache.put(CLUSTER, message)
    full(cache, *leaves)
    return cache


def test_an_aggregate_diamond_expands_to_ordered_unique_leaves() -> None:
    cache = _aggregate_cache(
        aggregate("root", "left", "right", "z"),
        aggregate("left", "d", "x"),
        aggregate("right", "d"),
        leaves=("d", "x", "z"),
    )
    config = walk("l", "h", cache.lookup).config
    assert config is not None
    assert not isinstance(config, XdsError)
    assert config.clusters["root"].leaves == ("d", "x", "z")
    assert config.clusters["right"].leaves == ("d",)
    assert set(config.clusters) == {"root", "left", "right", "d", "x", "z"}


def test_an_aggregate_cycle_is_an_error_for_that_cluster_only() -> None:
    cache = _aggregate_cache(
        aggregate("root", "a", "ok"), aggregate("a", "b"), aggregate("b", "a"), leaves=("ok",)
    )
    config = walk("l", "h", cache.lookup).config
    assert config is not None
    assert not isinstance(config, XdsError)
    b = config.clusters["b"]
    assert b.error is not None
    assert str(b.error) == "aggregate cluster cycle: a -> b -> a"
    assert config.clusters["root"].leaves == ("ok",)


def test_aggregates_deeper_than_16_are_an_error() -> None:
    chain = [aggregate("root", "c1")] + [aggregate(f"c{i}", f"c{i + 1}") for i in range(1, 17)]
    cache = _aggregate_cache(*chain, cluster("c17"))
    cache.put(ENDPOINT, endpoints("c17"))
    config = walk("l", "h", cache.lookup).config
    assert config is not None
    assert not isinstance(config, XdsError)
    assert config.clusters["root"].error is not None
    assert str(config.clusters["root"].error) == 'aggregate cluster "root" nests deeper than 16'
    shallow = _aggregate_cache(*chain[:15], aggregate("c15", "c16"), cluster("c16"))
    shallow.put(ENDPOINT, endpoints("c16"))
    ok = walk("l", "h", shallow.lookup).config
    assert ok is not None
    assert not isinstance(ok, XdsError)
    assert ok.clusters["root"].leaves == ("c16",)


def test_a_cluster_switching_its_eds_service_name_changes_what_is_needed() -> None:
    cache = Cache()
    cache.put(LISTENER, listener("l"))
    cache.put(ROUTE_CONFIGURATION, routes("a"))
    full(cache, "a")
    before = walk("l", "h", cache.lookup)
    switched = cluster("a")
    switched.eds_cluster_config.service_name = "a-v2"
    cache.put(CLUSTER, switched)
    after = walk("l", "h", cache.lookup)
    assert (E, "a") in before.wanted
    assert (E, "a") not in after.wanted
    assert (E, "a-v2") in after.wanted
    assert after.config is None  # waiting for a-v2's endpoints


def test_listener_and_route_errors_replace_the_snapshot() -> None:
    cache = Cache()
    cache.missing(L, "l")
    result = walk("l", "h", cache.lookup)
    assert isinstance(result.config, ResourceDoesNotExistError)
    cache.put(LISTENER, listener("l"))
    cache.missing(R, "routes")
    assert isinstance(walk("l", "h", cache.lookup).config, ResourceDoesNotExistError)


def test_partial_errors_are_reported_per_cluster() -> None:
    cache = Cache()
    cache.put(LISTENER, listener("l"))
    cache.put(ROUTE_CONFIGURATION, routes("good", "gone", "no-endpoints"))
    full(cache, "good")
    cache.missing(C, "gone")
    cache.put(CLUSTER, cluster("no-endpoints"))
    cache.missing(E, "no-endpoints")
    config = walk("l", "h", cache.lookup).config
    assert config is not None
    assert not isinstance(config, XdsError)
    assert config.clusters["good"].ok
    assert isinstance(config.clusters["gone"].error, ResourceDoesNotExistError)
    assert config.clusters["no-endpoints"].ok
    assert isinstance(config.clusters["no-endpoints"].endpoints_error, ResourceDoesNotExistError)


def test_no_virtual_host_for_the_authority_is_an_error() -> None:
    cache = Cache()
    cache.put(LISTENER, listener("l"))
    cache.put(ROUTE_CONFIGURATION, routes("a", domains=("only.example.com",)))
    config = walk("l", "other.example.com", cache.lookup).config
    assert isinstance(config, XdsError)
    assert (
        str(config) == "RouteConfiguration \"routes\" has no virtual host for 'other.example.com'"
    )


def test_a_route_with_a_non_forwarding_action_reaches_no_cluster() -> None:
    cache = Cache()
    cache.put(LISTENER, listener("l"))
    message = routes("a")
    local = message.virtual_hosts[0].routes.add()
    local.match.prefix = "/local"
    local.non_forwarding_action.SetInParent()
    cache.put(ROUTE_CONFIGURATION, message)
    full(cache, "a")
    config = walk("l", "h", cache.lookup).config
    assert config is not None
    assert not isinstance(config, XdsError)
    assert list(config.clusters) == ["a"]


# ----------------------------------------------------------------------------- incremental walks


def _complete(cache: Cache, previous: XdsConfig | None = None) -> XdsConfig:
    config = walk("l", "h", cache.lookup, previous).config
    assert isinstance(config, XdsConfig)
    return config


def _shared_eds_cache() -> Cache:
    """Clusters a and b share the assignment "svc"; c has its own; "agg" aggregates a and c."""
    cache = Cache()
    cache.put(LISTENER, listener("l"))
    cache.put(ROUTE_CONFIGURATION, routes("a", "b", "c", "agg"))
    for name in ("a", "b"):
        shared = cluster(name)
        shared.eds_cluster_config.service_name = "svc"
        cache.put(CLUSTER, shared)
    cache.put(CLUSTER, cluster("c"))
    cache.put(CLUSTER, aggregate("agg", "a", "c"))
    cache.put(ENDPOINT, endpoints("svc"))
    cache.put(ENDPOINT, endpoints("c"))
    return cache


def test_a_walk_given_the_last_snapshot_reuses_the_entries_whose_views_did_not_change() -> None:
    cache = _shared_eds_cache()
    first = _complete(cache)
    cache.put(ENDPOINT, endpoints("c", port=9))
    second = _complete(cache, first)
    assert second.clusters["a"] is first.clusters["a"]
    assert second.clusters["b"] is first.clusters["b"]
    assert second.clusters["c"] is not first.clusters["c"]
    assert second == _complete(cache)  # the same snapshot as a walk from nothing


_CHANGES = st.lists(
    st.tuples(st.sampled_from(["svc", "c"]), st.sampled_from(["port", "missing", "back"])),
    min_size=1,
    max_size=6,
)


@settings(max_examples=examples(60), deadline=None)
@given(changes=_CHANGES)
def test_redoing_only_changed_assignments_gives_the_snapshot_a_full_walk_gives(
    changes: list[tuple[str, str]],
) -> None:
    cache = _shared_eds_cache()
    config = _complete(cache)
    for port, (name, change) in enumerate(changes, start=1):
        if change == "missing":
            cache.missing(E, name)
        else:
            cache.put(ENDPOINT, endpoints(name, port=port))
        redone = rewalk_endpoints(config, [name], cache.lookup, endpoint_users(config))
        assert redone is not None
        assert redone == _complete(cache)
        # errors are not part of equality: compare them as text
        for entry in redone.clusters.values():
            full_entry = _complete(cache).clusters[entry.name]
            assert str(entry.endpoints_error) == str(full_entry.endpoints_error)
        config = redone


def test_an_unchanged_assignment_leaves_the_snapshot_object_as_it_was() -> None:
    cache = _shared_eds_cache()
    config = _complete(cache)
    assert rewalk_endpoints(config, ["svc", "c"], cache.lookup, endpoint_users(config)) is config


def test_a_rewalk_gives_up_on_a_name_no_cluster_uses_or_an_assignment_pending_again() -> None:
    cache = _shared_eds_cache()
    config = _complete(cache)
    users = endpoint_users(config)
    assert users == {"svc": ["a", "b"], "c": ["c"]}
    assert rewalk_endpoints(config, ["other"], cache.lookup, users) is None
    del cache.states[(E, "c")]
    assert rewalk_endpoints(config, ["c"], cache.lookup, users) is None


def _http_routes() -> Any:
    """Two virtual hosts where gRPC's and Envoy's rules differ: the port ignored in host
    matching, and a route with a query parameter condition (which gRPC skips)."""
    message = routes("grpc-only", domains=("*",))
    message.ignore_port_in_host_matching = True
    vhost = message.virtual_hosts.add(name="web", domains=["web.example.com"])
    query = vhost.routes.add()
    query.match.prefix = "/"
    query.match.query_parameters.add(name="beta").present_match = True
    query.route.cluster = "beta"
    plain = vhost.routes.add()
    plain.match.prefix = "/"
    plain.route.cluster = "web"
    return message


def test_http_rules_choose_the_virtual_host_and_routes_as_envoys_router_does() -> None:
    """With ``http_rules`` the walk ignores the port as the route configuration asks and
    reaches the clusters of routes only an HTTP router considers; gRPC's walk does neither."""
    cache = Cache()
    cache.put(LISTENER, listener("l"))
    cache.put(ROUTE_CONFIGURATION, _http_routes())
    full(cache, "grpc-only", "beta", "web")
    http = walk("l", "web.example.com:8080", cache.lookup, http_rules=True).config
    assert isinstance(http, XdsConfig)
    assert http.virtual_host.name == "web"
    assert set(http.clusters) == {"beta", "web"}
    grpc = walk("l", "web.example.com:8080", cache.lookup).config
    assert isinstance(grpc, XdsConfig)
    assert grpc.virtual_host.name == "vh"
    assert set(grpc.clusters) == {"grpc-only"}
    exact = walk("l", "web.example.com", cache.lookup).config
    assert isinstance(exact, XdsConfig)
    assert set(exact.clusters) == {"web"}


def test_an_eds_entry_built_through_its_slots_is_the_one_init_builds() -> None:
    """`_eds_entry` sets every field of `ClusterConfig` (value or error) as its __init__ does."""
    view = CLUSTER.decode(cluster("c").SerializeToString())[1]
    assignment = ENDPOINT.decode(endpoints("c").SerializeToString())[1]
    error = XdsError("gone")
    assert [f.name for f in attrs.fields(ClusterConfig)] == [
        "name",
        "cluster",
        "endpoints",
        "endpoints_error",
        "leaves",
        "error",
    ]
    for value, expected in (
        (assignment, ClusterConfig(name="c", cluster=view, endpoints=assignment, leaves=("c",))),
        (error, ClusterConfig(name="c", cluster=view, endpoints_error=error, leaves=("c",))),
    ):
        built = _eds_entry("c", view, value)
        assert type(built) is ClusterConfig
        for field in attrs.fields(ClusterConfig):
            value_built, value_expected = getattr(built, field.name), getattr(expected, field.name)
            assert value_built is value_expected or value_built == value_expected, field.name
            assert type(value_built) is type(value_expected), field.name
        assert built == expected
        assert repr(built) == repr(expected)


def _logical_dns(name: str) -> Any:
    message = cluster_pb2.Cluster(name=name, type=cluster_pb2.Cluster.LOGICAL_DNS)
    socket = message.load_assignment.endpoints.add().lb_endpoints.add()
    socket.endpoint.address.socket_address.address = "dns.example.com"
    socket.endpoint.address.socket_address.port_value = 443
    return message


_ROOTS = ["a", "b", "c", "d", "e"]
#: What a root cluster is: absent, missing, EDS with its own or a shared assignment (present,
#: absent or missing), LOGICAL_DNS, or an aggregate of two others.
_KINDS = st.sampled_from(
    ["absent", "missing", "eds", "eds", "eds-shared", "eds-no-endpoints", "eds-gone", "dns", "agg"]
)


def _mixed_cache(kinds: list[str]) -> Cache:
    cache = Cache()
    cache.put(LISTENER, listener("l"))
    cache.put(ROUTE_CONFIGURATION, routes(*_ROOTS))
    cache.put(ENDPOINT, endpoints("shared"))
    for name, kind in zip(_ROOTS, kinds, strict=True):
        if kind == "missing":
            cache.missing(C, name)
        elif kind.startswith("eds"):
            message = cluster(name)
            if kind == "eds-shared":
                message.eds_cluster_config.service_name = "shared"
            cache.put(CLUSTER, message)
            if kind == "eds":
                cache.put(ENDPOINT, endpoints(name))
            elif kind == "eds-gone":
                cache.missing(E, name)
        elif kind == "dns":
            cache.put(CLUSTER, _logical_dns(name))
        elif kind == "agg":
            cache.put(CLUSTER, aggregate(name, *[n for n in _ROOTS if n != name][:2]))
    return cache


def _as_text(result: Any) -> Any:
    """A walk's result with its errors as text (errors are not part of equality)."""
    config = result.config
    clusters = None
    if isinstance(config, XdsConfig):
        clusters = [
            (name, entry, str(entry.error), str(entry.endpoints_error))
            for name, entry in config.clusters.items()
        ]
    return dict(result.needed), clusters, None if clusters is not None else str(config)


@settings(max_examples=examples(80), deadline=None)
@given(kinds=st.lists(_KINDS, min_size=5, max_size=5), by_names=st.booleans())
def test_the_roots_read_one_type_at_a_time_give_the_walk_of_one_root_at_a_time(
    kinds: list[str], by_names: bool
) -> None:
    """Reading the roots' clusters, then their assignments, one type per pass gives the walk
    each root resolved in turn gives: the same entries in the same order, the same errors and
    needs, and the previous snapshot's entries reused alike."""
    cache = _mixed_cache(kinds)

    def states(type_url: str, names: list[str]) -> list[_dependencies.Resolved | None]:
        return [cache.lookup(type_url, name) for name in names]

    def walked(previous: XdsConfig | None = None) -> Any:
        return walk("l", "x", cache.lookup, previous, by_names=states if by_names else None)

    bulk = walked()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_dependencies, "_resolve_eds_roots", lambda *args: None)
        each = walked()
        assert _as_text(bulk) == _as_text(each)
        again_each = walked(each.config if isinstance(each.config, XdsConfig) else None)
    again = walked(bulk.config if isinstance(bulk.config, XdsConfig) else None)
    assert _as_text(again) == _as_text(again_each)
    if isinstance(again.config, XdsConfig):  # the same entries reused (the same views)
        assert isinstance(bulk.config, XdsConfig)
        assert isinstance(each.config, XdsConfig)
        assert isinstance(again_each.config, XdsConfig)
        assert [
            again.config.clusters[n] is bulk.config.clusters[n] for n in bulk.config.clusters
        ] == [
            again_each.config.clusters[n] is each.config.clusters[n] for n in each.config.clusters
        ]
