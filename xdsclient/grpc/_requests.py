"""The request messages of a request-streaming call, kept so that a retry can send them again
(gRFC A6, as C-core's retry filter does).

Why: a client-streaming or bidirectional call is retried as a unary one is, until it commits,
and each new attempt must first get the messages the earlier ones got, in order. C-core's retry
filter (``retry_filter_legacy_call_data.cc``, what grpcio runs) keeps the call's initial
metadata and every message sent while the call is not committed, counting their bytes; once the
count passes the per-RPC limit (the channel argument ``grpc.per_rpc_retry_buffer_size``: 256 KiB
unless given, clamped to [0, INT_MAX]) the call commits: no attempt after the current one, and
each message is let go once the current attempt has sent it. The call also commits when the
server's response headers or a message reach it (the call driver calls `RetryBuffer.commit`).
C-core has no channel-wide limit (``grpc.retry_buffer_size`` is grpc-js's), so none is here.

`RetryBuffer` decides (sans I/O: sizes in, committed or not out); `RequestStream` waits: one
reader of the caller's source (its request iterator, or its ``write`` calls) for the whole call,
so that an attempt ending mid-read neither loses a message nor cancels the caller's iterator,
and one writer per attempt (`RequestStream.send`) that replays the kept messages, then forwards
new ones as they come, then half-closes.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import grpc

__all__ = [
    "DEFAULT_RETRY_BUFFER_SIZE",
    "ENABLE_RETRIES",
    "PER_RPC_RETRY_BUFFER_SIZE",
    "RequestStream",
    "RetryBuffer",
    "metadata_size",
    "retries_enabled",
    "retry_buffer_size",
]

#: The channel argument C-core reads the per-call limit from.
PER_RPC_RETRY_BUFFER_SIZE = "grpc.per_rpc_retry_buffer_size"
#: The channel argument that turns C-core's retry filter off (0) for every call kind.
ENABLE_RETRIES = "grpc.enable_retries"
#: C-core's limit when the argument is not given.
DEFAULT_RETRY_BUFFER_SIZE = 256 * 1024
_INT_MAX = 2**31 - 1
#: HPACK's overhead per header field (RFC 7541, section 4.1), which C-core counts too
_ENTRY_OVERHEAD = 32
_END = object()
#: grpc.aio's words for the misuses of a request stream
_STYLE = "The iterator and read/write APIs may not be mixed on a single RPC."
_HALF_CLOSED = 'RPC is half closed after calling "done_writing".'


def retry_buffer_size(options: Sequence[tuple[str, Any]]) -> int:
    """The per-call retry buffer limit in ``options`` as C-core reads it: the last integer
    given for ``grpc.per_rpc_retry_buffer_size``, clamped to [0, INT_MAX]; 256 KiB without
    one."""
    limit = DEFAULT_RETRY_BUFFER_SIZE
    for key, value in options:
        if key == PER_RPC_RETRY_BUFFER_SIZE and isinstance(value, int):
            limit = value
    return min(max(limit, 0), _INT_MAX)


def retries_enabled(options: Sequence[tuple[str, Any]]) -> bool:
    """Whether ``options`` leave retries on, as C-core reads ``grpc.enable_retries`` (a
    boolean channel argument): the last integer given decides, 0 turns them off and any other
    turns them on; a value that is not an integer is ignored; on without one."""
    enabled = True
    for key, value in options:
        if key == ENABLE_RETRIES and isinstance(value, int):
            enabled = value != 0
    return enabled


def metadata_size(path: str, metadata: Sequence[tuple[str, str | bytes]]) -> int:
    """The bytes C-core counts for a call's initial metadata: each field's name and value
    plus 32 (HPACK's entry size), for ``:path`` and every (key, value) of the caller's."""
    size = len(":path") + len(path.encode()) + _ENTRY_OVERHEAD
    for key, value in metadata:
        raw = value if isinstance(value, bytes) else value.encode()
        size += len(key) + len(raw) + _ENTRY_OVERHEAD
    return size


class RetryBuffer:
    """The messages of one call kept for replay, and whether the call has committed.

    Invariant: every message from index `_first` on is kept; a message is let go only once the
    call has committed and the attempt in flight has sent it (no later attempt needs it).
    """

    __slots__ = ("_first", "_kept", "_sent", "bytes", "committed", "count", "limit")

    def __init__(self, limit: int, metadata: int) -> None:
        """A buffer holding ``limit`` bytes, ``metadata`` of them the call's initial metadata
        (a call whose metadata alone passes the limit is committed from the start)."""
        self.limit = limit
        #: bytes counted so far (initial metadata and every message)
        self.bytes = metadata
        self.committed = metadata > limit
        #: messages the caller has given so far
        self.count = 0
        self._kept: collections.deque[bytes] = collections.deque()
        self._first = 0
        #: messages the attempt in flight has sent (0 between attempts)
        self._sent = 0

    def add(self, message: bytes) -> None:
        """The caller gave ``message`` (serialized): keep it, and commit past the limit."""
        self._kept.append(message)
        self.count += 1
        self.bytes += len(message)
        if self.bytes > self.limit:
            self.commit()

    def get(self, index: int) -> bytes:
        """Message ``index`` (0-based), still kept."""
        return self._kept[index - self._first]

    def sent(self, index: int) -> None:
        """The attempt in flight has sent message ``index``."""
        self._sent = index + 1
        if self.committed:
            self._release()

    def attempt_ended(self) -> None:
        """The attempt in flight ended: the next one starts from the first message."""
        self._sent = 0

    def commit(self) -> None:
        """No attempt after the current one: let go of what it has sent."""
        self.committed = True
        self._release()

    def _release(self) -> None:
        while self._first < self._sent and self._kept:
            self._kept.popleft()
            self._first += 1


class RequestStream:
    """Where a request-streaming call's messages come from and how each attempt sends them
    (see the module's docstring). ``requests`` is the caller's request iterator (sync or
    async), or None for a call written with `write` and `done_writing`; ``failed`` is told
    when the iterator raises (grpc.aio cancels the call then)."""

    __slots__ = (
        "_broken",
        "_closed",
        "_ended",
        "_failed",
        "_given",
        "_half_close",
        "_half_closed",
        "_iterator",
        "_reading",
        "_requests",
        "_sent",
        "_serializer",
        "_waiters",
        "_writes",
        "buffer",
    )

    def __init__(
        self,
        requests: Any,
        serializer: Callable[[Any], bytes] | None,
        buffer: RetryBuffer,
        failed: Callable[[BaseException], object],
    ) -> None:
        self.buffer = buffer
        self._requests = requests
        self._serializer = serializer
        self._failed = failed
        self._iterator: AsyncIterator[Any] | Iterator[Any] | None = None
        #: the messages given with `write`, then `_END` (None: the call has an iterator)
        self._writes: asyncio.Queue[Any] | None = asyncio.Queue() if requests is None else None
        #: whether the source has no more messages; whether the call ended
        self._ended = False
        self._closed = False
        #: whether the source failed (the call is cancelled)
        self._broken = False
        #: the one read from the source under way (its result lands in the buffer)
        self._reading: asyncio.Task[None] | None = None
        #: messages given with `write` so far; whether `done_writing` was called
        self._given = 0
        self._half_close = False
        #: the most messages any attempt has sent; whether one has half-closed
        self._sent = 0
        self._half_closed = False
        #: (messages sent, future) for the `write` and `done_writing` calls waiting
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    @property
    def iterating(self) -> bool:
        """Whether the call's messages come from a request iterator."""
        return self._writes is None

    # --- the caller's side (a call made without an iterator) ---

    async def write(self, message: Any) -> None:
        """Give ``message``; return once an attempt has sent it or the call ended."""
        writes = self._writes
        if writes is None:
            raise grpc.aio.UsageError(_STYLE)
        if self._half_close:
            raise asyncio.InvalidStateError(_HALF_CLOSED)
        writes.put_nowait(self._serialize(message))
        self._given += 1
        await self._until(self._given)

    async def done_writing(self) -> None:
        """No more messages; return once an attempt has half-closed or the call ended."""
        writes = self._writes
        if writes is None:
            raise grpc.aio.UsageError(_STYLE)
        if not self._half_close:
            self._half_close = True
            writes.put_nowait(_END)
        await self._until(-1)

    # --- each attempt's side ---

    async def send(self, call: Any) -> None:
        """Send the messages on attempt ``call`` (a grpc.aio call made without an iterator,
        with bytes for requests), the kept ones first, then half-close. Returns when done or
        when the attempt ended (its status says how); the caller cancels it at the attempt's
        end, which never cancels a read of the source."""
        index = 0
        buffer = self.buffer
        try:
            while True:
                if index < buffer.count:  # kept, or read at once: no wait
                    message = buffer.get(index)
                elif not self._ended and self._reading is None and self._read_now():
                    continue
                else:
                    message = await self._message(index)
                if message is _END:
                    if self._broken:
                        return  # the call is being cancelled
                    await call.done_writing()
                    self._half_closed = True
                    self._wake()
                    return
                await call.write(message)
                buffer.sent(index)
                index += 1
                if index > self._sent:
                    self._sent = index
                    self._wake()
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
            return  # the attempt ended

    def close(self) -> None:
        """The call ended: stop reading the source and release every waiting writer."""
        if self._reading is not None:
            self._reading.cancel()
        for _, future in self._waiters:
            if not future.done():
                future.set_result(None)
        self._waiters.clear()
        self._closed = True

    # --- inside ---

    async def _message(self, index: int) -> Any:
        """Message ``index``, read from the source when it is the next one (`_END` after the
        last). A message ready at once (a sync iterator's, a queued write) is read here; one
        that must be awaited (an async iterator's, a write to come) by a task of its own,
        which an attempt's end never cancels."""
        buffer = self.buffer
        while index >= buffer.count:
            if self._ended:
                return _END
            if self._reading is None and not self._read_now():
                self._reading = asyncio.ensure_future(self._read())
            if self._reading is not None:
                await asyncio.shield(self._reading)
        return buffer.get(index)

    def _read_now(self) -> bool:
        """Read the next message if the source has it ready; whether it had."""
        writes = self._writes
        if writes is not None:
            if writes.empty():
                return False
            self._take(writes.get_nowait())
            return True
        try:
            iterator = self._source()
            if isinstance(iterator, AsyncIterator):
                return False
            self._take(self._serialize(next(iterator)))
        except StopIteration:
            self._take(_END)
        except Exception as error:
            self._fail(error)
        return True

    async def _read(self) -> None:
        """Wait for the next message of the source (or its end) and take it."""
        try:
            writes = self._writes
            if writes is not None:
                self._take(await writes.get())
                return
            iterator = self._source()
            assert isinstance(iterator, AsyncIterator)
            try:
                self._take(self._serialize(await anext(iterator)))
            except StopAsyncIteration:
                self._take(_END)
        except Exception as error:
            self._fail(error)
        finally:
            self._reading = None

    def _source(self) -> AsyncIterator[Any] | Iterator[Any]:
        iterator = self._iterator
        if iterator is None:
            requests = self._requests
            iterator = self._iterator = (
                aiter(requests) if isinstance(requests, AsyncIterable) else iter(requests)
            )
        return iterator

    def _take(self, message: Any) -> None:
        if message is _END:
            self._ended = True
        else:
            self.buffer.add(message)

    def _fail(self, error: Exception) -> None:
        """The caller's iterator (or its serializer) failed: grpc.aio cancels the call (and no
        attempt half-closes)."""
        self._ended = self._broken = True
        self._failed(error)

    def _serialize(self, message: Any) -> bytes:
        if self._serializer is None:
            return message  # type: ignore[no-any-return]
        return self._serializer(message)

    async def _until(self, sent: int) -> None:
        """Wait until ``sent`` messages were sent (-1: an attempt half-closed) or the call
        ended."""
        if self._closed or self._done(sent):
            return
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((sent, future))
        await future

    def _done(self, sent: int) -> bool:
        return self._half_closed if sent < 0 else self._sent >= sent

    def _wake(self) -> None:
        waiting = []
        for sent, future in self._waiters:
            if self._done(sent):
                if not future.done():
                    future.set_result(None)
            else:
                waiting.append((sent, future))
        self._waiters = waiting
