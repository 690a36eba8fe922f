"""Freed memory handed back to the operating system around a large message, on glibc.

Why: a large xDS response (1.7 MB for 10,000 endpoint assignments) is allocated and freed by
gRPC's threads and by ours: its buffers, the bytes, the parsed message. glibc keeps what they
freed in its heaps, and after the first large block it frees it raises its ``mmap`` threshold,
so the next ones come from the heaps too; the free space is fragmented around what lives on,
and each large response left a little more of the process resident (3 to 5 MiB after three
updates of 10,000 assignments, in ``bench/e2e.py``). ``malloc_trim(0)`` returns every whole
free page of every arena to the system.

When: twice per large message. A transport tells its `MemoryRelease` of each message's size
before it decodes it (`received`): a large one trims then, returning what gRPC freed of its
receive buffers (in its threads' arenas) and whatever earlier messages left, before the parse
and the new views take their memory: the peak is that much lower (about 2 MiB at N=10,000;
0.6 ms, once per large message, before its ACK). And the transport calls `settle`
before it reads the next message: the drive loop reads it only once the last one is applied,
ACKed and dropped and its watchers have run, so that trim, off the path to the ACK, returns
what the large one left while the client idles. Small messages never trim (the call walks
every arena).

Where: glibc only (``os.confstr("CS_GNU_LIBC_VERSION")``; ctypes is imported on the first
trim, not with the package). Elsewhere `MemoryRelease` does nothing: musl, macOS and Windows
have no ``malloc_trim``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

__all__ = ["LARGE_MESSAGE", "MemoryRelease", "glibc_trim", "is_glibc"]

#: A message of at least this many bytes is large: the heaps are trimmed before it is decoded
#: and once it is let go.
LARGE_MESSAGE = 1 << 20


def is_glibc(confstr: Callable[[str], str | None] | None = None) -> bool:
    """Whether this process runs on glibc (``confstr`` is `os.confstr`, given for the tests;
    a platform without it, Windows, is not glibc)."""
    if confstr is None:
        confstr = getattr(os, "confstr", None)
        if confstr is None:
            return False
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
    """Trims the heaps before each large message (``large`` bytes or more) is decoded, and once
    more when the transport is about to read the next. ``trim`` is the call that does it:
    `glibc_trim` on glibc, and nothing (None) elsewhere; a test gives its own."""

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
        """A message of ``size`` bytes was read and is about to be decoded: trim now if it is
        large (and again at the next `settle`)."""
        if size >= self._large and self._trim is not None:
            self._pending = True
            self._call(self._trim)

    def settle(self) -> None:
        """The messages read so far are let go: trim if one of them was large."""
        if self._pending and self._trim is not None:
            self._pending = False
            self._call(self._trim)

    def _call(self, trim: Callable[[], object]) -> None:
        self.trims += 1
        trim()
