"""What the cache keeps per resource, and what a response costs at its peak (tracemalloc: exact,
unlike RSS): objects shared by a response's entries are not copied per entry (compiled, a
timestamp stored from a C double made a float object for each), and telling unchanged
resources apart makes no pair per resource."""

from __future__ import annotations

import gc
import tracemalloc

from tests.builders import EDS, NODE, endpoints, sotw_response
from xdsclient import Session
from xdsclient._errors import TransportError
from xdsclient.resources import ENDPOINT

#: The most an unchanged resend may allocate at its peak, per resource (the classify step's
#: index of cached bytes and the resource's ``Any`` bytes): 263 bytes in CPython 3.11, pure
#: Python and compiled, from 319 when the index held a (name, value) pair per resource.
RESEND_BUDGET = 290


def _loaded(names: list[str]) -> Session:
    session = Session(node=NODE, resource_types=[ENDPOINT])
    for name in names:
        session.subscribe(EDS, name)
    session.connect(0.0)
    session.requests_to_send(0.0)
    response = sotw_response(EDS, [endpoints(n) for n in names], version="1", nonce="n")
    session.receive(response, 1.5)
    return session


def test_the_entries_of_one_response_share_one_update_time_object() -> None:
    """Every entry a response updates holds the same ``updated_at`` object, not a copy each."""
    names = [f"c{i}" for i in range(50)]
    table = _loaded(names).table(EDS)
    stamps = {id(table[name].updated_at) for name in names}
    assert len(stamps) == 1
    assert table[names[0]].updated_at == 1.5


def test_a_connectivity_error_records_one_error_time_object_for_every_entry() -> None:
    """A stream failure stamps every entry with the same ``error_at`` object."""
    names = [f"c{i}" for i in range(50)]
    session = _loaded(names)
    session.requests_to_send(1.5)
    session.disconnect(2.5, TransportError("down"), report=True)
    table = session.table(EDS)
    assert {id(table[name].error_at) for name in names} == {id(table[names[0]].error_at)}
    assert table[names[0]].error_at == 2.5


def test_an_unchanged_resend_allocates_at_most_its_budget_per_resource() -> None:
    """Receiving every resource again unchanged peaks at `RESEND_BUDGET` bytes each."""
    names = [f"c{i}" for i in range(2_000)]
    session = _loaded(names)
    session.requests_to_send(1.5)
    again = sotw_response(EDS, [endpoints(n) for n in names], version="2", nonce="m")
    gc.collect()
    tracemalloc.start()
    try:
        events = session.receive(again, 2.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert events == []
    assert peak / len(names) <= RESEND_BUDGET, peak / len(names)
