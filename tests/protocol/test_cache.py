"""The resource cache outlives sessions: a new session over the same cache keeps every value,
status and TTL (what a change of server will rely on)."""

from __future__ import annotations

from tests.builders import CDS, EDS, NODE, cluster, endpoints, sotw_response, wrapped
from xdsclient import DataError, ResourceExpiredError, ResourceStatus, Session
from xdsclient._names import OLD_AUTHORITY, authority_of
from xdsclient._protocol import ResourceCache
from xdsclient._protocol._cache import CacheEntry
from xdsclient.resources import CLUSTER, ENDPOINT


def _session(cache: ResourceCache | None = None) -> Session:
    return Session(node=NODE, resource_types=[CLUSTER, ENDPOINT], cache=cache)


def test_a_session_adopting_an_entry_keeps_its_value_and_rearms_its_ttl() -> None:
    first = _session()
    first.subscribe(CDS, "a")
    first.connect(0.0)
    first.requests_to_send(0.0)
    resource = wrapped(cluster("a"), name="a", version="1", ttl=10)
    first.receive(sotw_response(CDS, [resource], version="1", nonce="n"), 1.0)
    second = _session()
    second.subscribe(CDS, "a")
    second.adopt(CDS, "a", first.table(CDS)["a"])
    state = second.resource_state(CDS, "a")
    assert state is not None
    assert state.status is ResourceStatus.ACKED
    assert state.expires_at == 11.0
    assert second.next_deadline() == 11.0
    events = second.expire(11.0)
    assert [type(e) for e in events] == [DataError]
    assert isinstance(events[0], DataError)
    assert isinstance(events[0].error, ResourceExpiredError)


def test_an_adopted_entry_starts_no_does_not_exist_timer_and_claims_no_delta_version() -> None:
    first = _session()
    first.subscribe(CDS, "a")
    first.connect(0.0)
    first.requests_to_send(0.0)
    first.receive(sotw_response(CDS, [cluster("a")], version="1", nonce="n"), 1.0)
    second = Session(node=NODE, resource_types=[CLUSTER], delta=True)
    second.subscribe(CDS, "a")
    second.adopt(CDS, "a", first.table(CDS)["a"])
    second.connect(2.0)
    [request] = second.requests_to_send(2.0)
    assert list(request.resource_names_subscribe) == ["a"]
    assert dict(request.initial_resource_versions) == {}
    assert second.next_deadline() is None


def test_an_entry_nobody_wants_is_not_adopted() -> None:
    first = _session()
    first.subscribe(CDS, "a")
    second = _session()
    second.adopt(CDS, "a", first.table(CDS)["a"])
    assert second.resource_state(CDS, "a") is None


def test_sessions_sharing_a_cache_see_each_others_resources() -> None:
    clusters = _session()
    endpoints_session = Session(node=NODE, resource_types=[ENDPOINT], cache=clusters.cache)
    endpoints_session.subscribe(EDS, "e")
    endpoints_session.connect(0.0)
    endpoints_session.requests_to_send(0.0)
    endpoints_session.receive(sotw_response(EDS, [endpoints("e")], version="1", nonce="n"), 1.0)
    state = clusters.cache.state(EDS, "e")
    assert state is not None
    assert state.status is ResourceStatus.ACKED
    assert [s.name for s in clusters.cache.states()] == ["e"]


def test_names_carry_their_authority() -> None:
    assert authority_of("backend") == OLD_AUTHORITY == "#old"
    assert authority_of("xdstp://mesh.example/envoy.config.cluster.v3.Cluster/backend") == (
        "mesh.example"
    )


def _fields(entry: CacheEntry) -> tuple[str, ...]:
    """Every field of a cache entry, compiled (mypyc lists them) or not (its slots)."""
    cls = type(entry)
    fields: tuple[str, ...] = getattr(cls, "__mypyc_attrs__", None) or cls.__slots__
    return fields


def test_an_adopted_entry_takes_every_field_of_its_source() -> None:
    """A hand-over copies every field of the old writer's entry, the ones added later too."""
    source = CacheEntry()
    fields = _fields(source)
    assert "status" in fields
    assert "expires_at" in fields
    values = {name: object() for name in fields}
    values["status"] = ResourceStatus.NACKED_BUT_CACHED
    for name in fields:
        try:
            setattr(source, name, values[name])
        except TypeError:  # compiled: a typed field takes only its type
            values[name] = {"raw": b"x", "version": "7"}.get(name, 1.5)
            setattr(source, name, values[name])
    target = CacheEntry()
    target.copy_from(source)
    for name in fields:
        assert getattr(target, name) is values[name], name
