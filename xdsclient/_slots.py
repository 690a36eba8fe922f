"""Setting a frozen attrs value's slots directly, for the few values built per resource.

Why: a frozen attrs class initialises through keyword parsing and ``object.__setattr__`` per
field, which costs more than reading the resource it describes when thousands are built per
response (events, routes). Calling each slot's own setter gives the same value, equal, hashed
and shown alike. Only for classes without validators, converters or ``__attrs_post_init__``;
each user holds its builders to the class's ``__init__`` in a test.
"""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["slot_setters"]


def slot_setters(cls: type) -> tuple[Any, ...]:
    """The slot setters of ``cls``'s fields, in declaration order. Unpack them into one name per
    field: a field added or removed then fails at import instead of being left unset."""
    return tuple(getattr(cls, field.name).__set__ for field in attrs.fields(cls))
