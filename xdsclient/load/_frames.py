"""The pipe between a Locust master process and the command line: length-prefixed JSON frames.

Why frames, not lines: the master hands its merged `RunResult` (every client's row, every
histogram's buckets) and its progress snapshots (histograms too) to the parent over its
standard output. As one JSON line each, a run of a few hundred clients already wrote a line
past asyncio's 64 KiB ``StreamReader`` limit, and the parent failed after the run with no
report. A frame is its length (8 bytes, big-endian) and then that many bytes of UTF-8 JSON,
read with ``readexactly``: any size crosses, and nothing is parsed until all of it has come.

The child writes frames on a private copy of its standard output (`frame_writer`), and points
file descriptor 1 at standard error, so a stray print (from Python or from C) cannot land in
the middle of a frame.
"""

from __future__ import annotations

import asyncio
import json
import os
import struct
from collections.abc import AsyncIterator
from typing import IO, Any

__all__ = ["FrameError", "encode", "frame_writer", "read_frames", "write_frame"]

_HEADER = struct.Struct(">Q")


class FrameError(ValueError):
    """The pipe carried something that is not a whole frame of JSON."""


def encode(event: dict[str, Any]) -> bytes:
    """One frame: the length of ``event`` as JSON, then the JSON."""
    body = json.dumps(event, separators=(",", ":")).encode()
    return _HEADER.pack(len(body)) + body


def write_frame(out: IO[bytes], event: dict[str, Any]) -> None:
    """Write one frame of ``event`` to ``out`` and flush it."""
    out.write(encode(event))
    out.flush()


def frame_writer() -> IO[bytes]:
    """The child's end of the pipe: its standard output as it was, kept for frames alone;
    file descriptor 1 then goes to standard error (and `sys.stdout` should too)."""
    private = os.dup(1)
    os.dup2(2, 1)
    return os.fdopen(private, "wb")


async def read_frames(reader: asyncio.StreamReader) -> AsyncIterator[dict[str, Any]]:
    """Each frame's event until the pipe ends; `FrameError` when it ends inside a frame."""
    while True:
        try:
            header = await reader.readexactly(_HEADER.size)
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise FrameError("the pipe ended inside a frame's header") from None
            return
        (size,) = _HEADER.unpack(header)
        try:
            body = await reader.readexactly(size)
        except asyncio.IncompleteReadError as exc:
            raise FrameError(f"the pipe ended {len(exc.partial)} bytes into a frame of "
                             f"{size}") from None  # fmt: skip
        try:
            event = json.loads(body)
        except ValueError:
            raise FrameError(f"a frame of {size} bytes is not JSON") from None
        if not isinstance(event, dict):
            raise FrameError(f"a frame of {size} bytes is not a JSON object")
        yield event
