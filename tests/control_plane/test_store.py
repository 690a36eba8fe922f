"""The resource store: versions, order, and change notification."""

from __future__ import annotations

from xdsclient.testing._store import ResourceStore

from .helpers import CDS, EDS, packed, set_


def test_every_change_moves_the_type_version_on() -> None:
    """A set gives a fresh version that the type takes; a removal moves the type on too."""
    store = ResourceStore()
    first = set_(store, EDS, "a")
    second = set_(store, EDS, "a", generation=1)
    assert int(second) > int(first)
    assert store.type_version(EDS) == second
    assert store.remove(EDS, "a")
    assert int(store.type_version(EDS)) > int(second)
    assert not store.remove(EDS, "a")
    assert store.type_version(CDS) == "0"


def test_a_batch_tells_each_changed_type_once_at_its_end() -> None:
    """Listeners hear of each change at once, or once per type after a batch."""
    store = ResourceStore()
    heard: list[str] = []
    store.listen(heard.append)
    set_(store, EDS, "a")
    assert heard == [EDS]
    with store.batch():
        for name in "bcd":
            set_(store, EDS, name)
        set_(store, CDS, "x")
        assert heard == [EDS]
    assert heard == [EDS, CDS, EDS]


def test_a_few_names_among_many_come_in_the_type_order() -> None:
    """Selecting a few names among many gives the store's order: a replaced resource keeps
    its place, a removed and re-added one goes last."""
    store = ResourceStore()
    for i in range(100):
        set_(store, EDS, f"n{i}")
    set_(store, EDS, "n5", generation=1)
    store.remove(EDS, "n3")
    set_(store, EDS, "n3")
    picked = store.select(EDS, {"n3", "n50", "n5", "missing"})
    assert [name for name, _ in picked] == ["n5", "n50", "n3"]
    assert [name for name, _ in picked] == [
        name for name in store.of_type(EDS) if name in {"n3", "n50", "n5"}
    ]


def test_a_snapshot_is_a_sotw_response_of_the_names_at_the_type_version() -> None:
    """What REST and files serve: the named resources (all with None), no nonce."""
    store = ResourceStore()
    set_(store, EDS, "a")
    set_(store, EDS, "b")
    response, names = store.snapshot(EDS, {"b"})
    assert names == ("b",)
    assert list(response.resources) == [packed(EDS, "b")]
    assert response.version_info == store.type_version(EDS)
    assert response.nonce == ""
    assert store.snapshot(EDS, None)[1] == ("a", "b")
