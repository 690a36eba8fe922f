"""The core's hot-path event builder gives the value the class's constructor gives."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from xdsclient._protocol._events import ResourceChanged, resource_changed
from xdsclient._slots import slot_setters


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
