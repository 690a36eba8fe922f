"""Freed memory handed back to the operating system after a large message, on glibc.

Why: a large xDS response (1.7 MB for 10,000 endpoint assignments) is allocated and freed by
gRPC's threads and by ours: its buffers, the bytes, the parsed message. glibc keeps what they
freed in its heaps, and after the first large block it frees it raises its ``mmap`` threshold,
so the next ones come from the heaps too; the free space is fragmented around what lives on,
and each large response left a little more of the process resident (3 to 5 MiB after three
updates of 10,000 assignments, in ``bench/e2e.py``). ``malloc_trim(0)`` returns every whole
free page of every arena to the system.

When: once per large message, after it is let go. A transport tells its `MemoryRelease` of
each message's size as it decodes it (`received`) and calls `settle` before it reads the next
one: the drive loop reads the next response only once the last one is applied, ACKed and
dropped and its watchers have run, so the trim is off the path to the ACK and frees what that
response left. Small messages never trim (the call walks every arena: about a millisecond).

Where: glibc only (``os.confstr("CS_GNU_LIBC_VERSION")``; ctypes is imported on the first
trim, not with the package). Elsewhere `MemoryRelease` does nothing: musl, macOS and Windows
have no ``malloc_trim``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

__all__ = ["LARGE_MESSAGE", "MemoryRelease", "glibc_trim", "is_glibc"]

#: A message of at least this many bytes is large: once it is let go, the heaps are trimmed.
LARGE_MESSAGE = 1 << 20


def is_glibc(confstr: Callable[[str], str | None] = os.confstr) -> bool:
    """Whether this process runs on glibc (``confstr`` is `os.confstr`, given for the tests)."""
    try:
        version = confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):  # a name the platform does not know: not glibc
        return False
    return bool(version) and str(version).startswith("glibc")


def glibc_trim() -> int:
    """``malloc_trim(0)``: hand every whole free page of glibc's arenas back to the system;
    1 if it released memory. Only on glibc (`is_glibc`)."""
    return int(_malloc_trim()(0))


_TRIM: list[Any] = []


def _malloc_trim() -> Any:
    if not _TRIM:
        import ctypes

        function = ctypes.CDLL(None).malloc_trim
        function.argtypes = (ctypes.c_size_t,)
        function.restype = ctypes.c_int
        _TRIM.append(function)
    return _TRIM[0]


class MemoryRelease:
    """Trims the heaps once after each large message (``large`` bytes or more), when the
    transport is about to read the next. ``trim`` is the call that does it: `glibc_trim` on
    glibc, and nothing (None) elsewhere; a test gives its own."""

    __slots__ = ("_large", "_pending", "_trim", "trims")

    def __init__(self, trim: Callable[[], object] | None, *, large: int = LARGE_MESSAGE) -> None:
        self._trim = trim
        self._large = large
        self._pending = False
        #: how many times it trimmed
        self.trims = 0

    @classmethod
    def for_platform(cls) -> MemoryRelease:
        """Trimming with `glibc_trim` on glibc; one that never trims elsewhere."""
        return cls(glibc_trim if is_glibc() else None)

    def received(self, size: int) -> None:
        """A message of ``size`` bytes was read (it is being decoded)."""
        if size >= self._large and self._trim is not None:
            self._pending = True

    def settle(self) -> None:
        """The messages read so far are let go: trim if one of them was large."""
        if self._pending:
            self._pending = False
            self.trims += 1
            assert self._trim is not None
            self._trim()
