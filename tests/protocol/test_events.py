"""The core's hot-path event builders give the value the class's constructor gives."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from tests.builders import EDS, NODE, endpoints, sotw_response
from xdsclient import Session
from xdsclient._protocol._events import ResourceChanged, resource_changed
from xdsclient._slots import slot_setters
from xdsclient.resources import ENDPOINT, ClusterLoadAssignmentView


def test_resource_changed_built_through_its_slots_equals_the_constructed_one() -> None:
    fields: dict[str, Any] = {"type_url": "t", "name": "n", "value": object(), "version": "7"}
    assert [field.name for field in attrs.fields(ResourceChanged)] == list(fields)
    built = resource_changed(*fields.values())
    made = ResourceChanged(**fields)
    assert type(built) is ResourceChanged
    assert built == made
    assert hash(built) == hash(made)
    assert repr(built) == repr(made)
    assert all(getattr(built, name) is value for name, value in fields.items())


def test_slot_setters_follow_the_declaration_order_and_the_value_stays_frozen() -> None:
    event = object.__new__(ResourceChanged)
    for setter, value in zip(slot_setters(ResourceChanged), ("t", "n", None, "1"), strict=True):
        setter(event, value)
    assert event == ResourceChanged(type_url="t", name="n", value=None, version="1")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.name = "other"  # type: ignore[misc]


def test_the_event_of_a_received_resource_equals_the_constructed_one() -> None:
    """The session builds `ResourceChanged` through its slots: every field as ``__init__``
    sets it, the value as decoded."""
    session = Session(node=NODE, resource_types=[ENDPOINT])
    session.subscribe(EDS, "e")
    session.connect(0.0)
    session.requests_to_send(0.0)
    (event,) = session.receive(sotw_response(EDS, [endpoints("e")], version="3", nonce="n"), 1.0)
    assert type(event) is ResourceChanged
    made = ResourceChanged(type_url=EDS, name="e", value=event.value, version="3")
    assert event == made
    assert hash(event) == hash(made)
    assert repr(event) == repr(made)
    assert isinstance(event.value, ClusterLoadAssignmentView)
    assert event.value.name == "e"
