"""attrs validators shared by configuration values (a leaf: imports nothing of ours)."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["positive"]


def positive(_: object, attribute: attrs.Attribute[Any], value: float) -> None:
    """The value must be greater than zero."""
    if not value > 0:
        raise ValueError(f"{attribute.name} must be positive, got {value!r}")
