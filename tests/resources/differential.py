"""What the differential decoder tests share: a decoder's verdict as plain data.

Each lean decoder is compared with the reference copy of the decoder it replaced:
both must accept with field-for-field equal views, or reject with the same name and message.
The reference has its own copies of the value classes and enums, so views are compared as
plain data, by class name and field.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs
from hypothesis import HealthCheck, settings

from tests.fuzz import examples
from xdsclient import ResourceDecodeError
from xdsclient.resources._regex import compile_regex

_RE2: type[Any] = type(compile_regex(""))  # the compiled pattern class of google-re2

#: 400 examples per property in `make test-long`, a fifth in `make test` (`tests/fuzz.py`).
FUZZ_SETTINGS = settings(
    max_examples=examples(400),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def verdict(view_class: Any, message: Any) -> tuple[str, Any]:
    """``("accepted", the view as plain data)`` or ``("rejected", (name, message))``."""
    raw = message.SerializeToString()
    try:
        view = view_class.from_proto(message, raw)
    except ResourceDecodeError as exc:
        return "rejected", (exc.name, exc.message)
    return "accepted", plain(view)


def _public(value: Any, field: Any) -> str:
    """The name a field is read by: its public property when a private field has one (a view's
    ``priorities``, built on first read, over its ``_priorities`` slot)."""
    alias = field.alias
    return alias if alias != field.name and hasattr(type(value), alias) else str(field.name)


def plain(value: Any) -> Any:
    """A value of either decoder's classes as plain data: attrs instances and named tuples by
    class name and every field (metadata too), enums by class and member name, compiled regexes
    by pattern and case sensitivity, tuples and lists element by element."""
    if attrs.has(type(value)):
        fields = attrs.fields(type(value))
        return (type(value).__name__, *(plain(getattr(value, _public(value, f))) for f in fields))
    if isinstance(value, enum.Enum):  # each decoder has its own copy of the enum
        return (type(value).__name__, value.name)
    if isinstance(value, _RE2):  # by what it matches, not by identity (RE2 caches only 128)
        return ("Regex", value.pattern, value.options.case_sensitive)
    names = getattr(type(value), "_fields", None)  # our records are named tuples
    if names is not None:
        return (type(value).__name__, *(plain(getattr(value, name)) for name in names))
    if isinstance(value, (tuple, list)):
        return tuple(plain(item) for item in value)
    return value
