"""What the wire reader tests share: mutated messages and byte-edited encodings to feed them.

Each compiled wire reader (`_endpoint_wire`, `_cluster_wire`, `_route_wire`) is held to upb's
verdict on messages near its common shape: the same message mutated field by field, and its
bytes replaced, inserted or cut (keys, lengths and values alike). The tests differ in their
seeds and in what they compare; the way they spoil a message is the same, and lives here.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.resources.test_mutations import _mutate

__all__ = ["Edit", "edited", "edits", "mutate", "mutated"]

#: One byte edit: (where, the byte, how: 0 replaces, 1 inserts, 2 cuts everything from there)
Edit = tuple[int, int, int]


def mutate(message: Any, data: st.DataObject, most: int, *, least: int = 1) -> None:
    """Mutate ``message`` (or a part of one) ``least`` to ``most`` times, in place."""
    for _ in range(data.draw(st.integers(least, most))):
        _mutate(message, data)


def mutated(seed: Any, data: st.DataObject, most: int, *, least: int = 1) -> Any:
    """A copy of ``seed`` mutated ``least`` to ``most`` times (the seed is left as it is)."""
    message = type(seed)()
    message.CopyFrom(seed)
    mutate(message, data, most, least=least)
    return message


def edits(reach: int) -> st.SearchStrategy[list[Edit]]:
    """Up to three byte edits at positions 0 to ``reach`` (taken modulo the length)."""
    return st.lists(
        st.tuples(st.integers(0, reach), st.integers(0, 255), st.integers(0, 2)), max_size=3
    )


def edited(encoded: bytes, changes: list[Edit]) -> bytes:
    """``encoded`` with ``changes`` applied in order; an edit that empties it ends them."""
    data = bytearray(encoded)
    for at, byte, how in changes:
        at %= len(data) + 1
        if how == 0 and at < len(data):
            data[at] = byte
        elif how == 1:
            data.insert(at, byte)
        else:
            del data[at:]
        if not data:
            break
    return bytes(data)
