"""The pipe from a Locust master to the command line: frames of any size cross whole."""

from __future__ import annotations

import asyncio
import os

import pytest

from xdsclient.load._frames import FrameError, encode, read_frames

pytestmark = pytest.mark.timeout(30)


async def _read_pipe(data: bytes) -> list[dict[str, object]]:
    """Every frame read back from a real OS pipe written with ``data``."""
    loop = asyncio.get_running_loop()
    read_end, write_end = os.pipe()
    reader = asyncio.StreamReader()  # asyncio's default 64 KiB limit
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_end, "rb")
    )

    def write() -> None:
        with os.fdopen(write_end, "wb") as out:
            out.write(data)

    try:
        writing = loop.run_in_executor(None, write)
        events = [event async for event in read_frames(reader)]
        await writing
        return events
    finally:
        transport.close()


async def test_a_frame_far_past_the_line_limit_crosses_a_pipe_whole():
    """A 4 MB event (a merged result of many thousand clients) and a small one after it arrive
    unchanged through asyncio's 64 KiB-limited reader."""
    big = {"event": "result", "per_client": [{"node_id": f"n-{i}", "x": i} for i in range(150_000)]}
    small = {"event": "progress", "n": 1}
    data = encode(big) + encode(small)
    assert len(data) > 4_000_000
    assert await _read_pipe(data) == [big, small]


@pytest.mark.parametrize(
    ("cut", "message"),
    [(3, "inside a frame's header"), (20, "bytes into a frame of")],
)
async def test_a_pipe_that_ends_inside_a_frame_is_an_error(cut, message):
    """A child that died mid-frame is a `FrameError`, not a half-read event."""
    with pytest.raises(FrameError, match=message):
        await _read_pipe(encode({"event": "result", "data": "x" * 100})[:cut])


async def test_a_frame_that_is_not_json_is_an_error():
    """A frame whose body is not a JSON object is a `FrameError`."""
    data = len(b"[1]").to_bytes(8, "big") + b"[1]"
    with pytest.raises(FrameError, match="not a JSON object"):
        await _read_pipe(data)
