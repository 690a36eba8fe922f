"""The cyclic garbage collector, paused while one response is decoded or one walk runs.

Why: decoding a response of N resources allocates several objects per resource, all of which
live on in the cache. Each 700 allocations start a young collection, every 10 of those an older
one, and as the heap grows CPython runs full collections that traverse every object of the
process: at N=10,000 about a quarter of an update went to collections that free nothing. With
the collector paused for the synchronous decode, the allocations of one response cost at most
one young collection afterwards.

Safe because the pause covers synchronous code only (no await: no other task runs in it), or
(the driver's) one response's step and the write of its ACK right after it, so the young
collection of what the response made does not delay the ACK; it restores the state it found
(an application that disabled the collector keeps it disabled), and it frees nothing late
that matters: garbage made meanwhile is collected by the next collection, as it would have
been by the one it skipped.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic collector for the block, if it is running."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
