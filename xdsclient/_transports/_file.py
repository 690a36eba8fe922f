"""The filesystem transport: a watched file holding a ``DiscoveryResponse`` (Envoy's
``path_config_source``), behind the same `Transport` interface as gRPC.

Why a transport and not a separate path: the session, cache, watchers and config walk stay the
same for every source; a file is a stream that "sends" its content whenever it changes:
- `open` reads and parses the file; a missing, unreadable, oversized, empty or unparsable file,
  or one whose response has no ``type_url``, is a `TransportError` naming it (the session then
  records it on every resource and keeps the last good values). After such a failure `open`
  waits for the file to change before reading again.
- `read` returns the content read at `open`, then waits for a change (inotify, through
  `watchfiles`, on the file's directory so atomic moves are seen; or on ``watched_directory``)
  and returns the new content. Content equal to what was last returned is skipped. Content that
  no longer parses ends the stream with the error; the next `open` reports it.
- Requests are the session's ACKs and NACKs; there is no one to send them to. A NACK (a rejected
  resource) is logged with the version it rejected, and the session has already reported it to
  watchers as a NACK would.
A periodic check (every ``poll_interval`` seconds) of the file's size, time and inode backs up
the event stream, so a change is never missed even when an event is.

Rule: a partial read is never applied. A file rewritten in place can be read mid-write, and a
prefix of a file is often valid (a YAML list cut between two resources, a binary message cut
between two fields) and would delete every resource after the cut. So a change is read at once
only when the path names a new file (another inode: an atomic move, a symlink swap, a file that
appeared); a change to the same file (an in-place write) is read once its size and time have
stayed the same for ``settle_interval`` seconds on the client's clock (`Settler`, sans-I/O), and
a read during which the file changed again is thrown away. inotify's close-after-write would say
"complete" sooner, but watchfiles does not report it (it reports added, modified and deleted).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import os
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from .._errors import TransportError
from .._runtime._clock import Clock, LoopClock
from ._base import StreamSpec
from ._formats import FormatError, format_of, parse_response

if TYPE_CHECKING:
    from .._settings._options import ClientOptions
    from .._settings._sources import FileSource

__all__ = ["FileStream", "FileTransport", "Settler"]

logger = logging.getLogger("xdsclient.transport.file")

_Stat = tuple[int, int, int] | None  # (inode, size, mtime_ns); None: no file

#: Seconds an in-place change must leave the file alone before it is read.
SETTLE_INTERVAL = 0.5


class Settler:
    """When a changed file may be read: stats and times in, a time out (no I/O, no clock).

    ``read`` is the stat of the content last read (or last failed to read). A stat naming
    another file (another inode, or a file appearing or disappearing) may be read at once: an
    atomic move. Any other change is an in-place write: it may be read once the file has kept
    the same stat for ``interval`` seconds; every further change of the stat restarts that
    wait. A change event with the stat unchanged (a coarse file time may hide a rewrite) starts
    a wait but never prolongs one: events of other files in a busy directory must not keep a
    change from being read.
    """

    def __init__(self, interval: float, read: _Stat) -> None:
        self.interval = interval
        self.read = read
        self._seen: _Stat = read  # the stat of the in-place write being waited on
        self._since: float | None = None  # when ``_seen`` was first observed; None: no wait

    @property
    def waiting_until(self) -> float | None:
        """When the in-place write being waited on may be read, or None."""
        return None if self._since is None else self._since + self.interval

    def due(self, stat: _Stat, now: float, *, event: bool = False) -> float | None:
        """When the file at ``stat`` (observed at ``now``) may be read: ``now`` or later; None
        when it has not changed since it was read. ``event``: a change event arrived."""
        if self._since is None and stat == self.read and not event:
            return None
        if _replaced(self.read, stat):
            return now
        if self._since is None or stat != self._seen:
            self._seen, self._since = stat, now
        return self._since + self.interval

    def done(self, stat: _Stat) -> None:
        """The file was read (or failed to read) at ``stat``."""
        self.read = self._seen = stat
        self._since = None


def _replaced(old: _Stat, new: _Stat) -> bool:
    """Whether the path names another file than it did (not the same file written again)."""
    return old is None or new is None or old[0] != new[0]


class FileTransport:
    """Streams over one watched file."""

    def __init__(
        self,
        source: FileSource,
        options: ClientOptions,
        *,
        clock: Clock | None = None,
        poll_interval: float = 1.0,
        settle_interval: float = SETTLE_INTERVAL,
    ) -> None:
        try:
            import watchfiles  # noqa: F401
        except ImportError:
            raise TransportError(
                "file sources need watchfiles: pip install 'xdsclient[files]'"
            ) from None
        self.source = source
        self.path = source.path
        self.directory = source.watched_directory or os.path.dirname(os.path.abspath(source.path))
        self.clock: Clock = clock if clock is not None else LoopClock()
        self.settle_interval = settle_interval
        self._kind = format_of(source.path)
        self._limit = options.max_receive_message_length
        self._poll_ms = max(1, int(poll_interval * 1000))
        self._failed = False  # the last open failed: wait for a change before reading again
        self._last: _Stat = None  # the stat of the last read, good or not
        self._nonces = itertools.count(1)

    async def open(self, spec: StreamSpec) -> FileStream:
        if spec.delta or spec.type_url is None or not spec.discovery:
            raise TransportError(f"{self.path}: a file serves one type, state of the world")
        settler = Settler(self.settle_interval, self._last)
        try:
            raw, message = await self.read_complete(
                spec.type_url, settler, wait_for_change=self._failed
            )
        except TransportError:
            self._failed = True
            raise
        self._failed = False
        return FileStream(self, spec.type_url, message, raw, settler)

    async def close(self) -> None:
        """Nothing to release: each wait for a change ends with it."""

    # ------------------------------------------------------------------ file access

    def stat(self) -> _Stat:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    async def read_complete(
        self,
        type_url: str,
        settler: Settler,
        *,
        wait_for_change: bool,
        wake: asyncio.Event | None = None,
    ) -> tuple[bytes, Any]:
        """The file's bytes and response once it may be read (`Settler`); with
        ``wait_for_change``, only after it changed since ``settler.read``. A failed read raises
        `TransportError`. Returns early, with no bytes and no response, when ``wake`` is set."""
        event = False
        while True:
            stat = self.stat()
            now = self.clock.time()
            due = settler.due(stat, now, event=event)
            if (due is not None and due <= now) or (due is None and not wait_for_change):
                try:
                    raw, message = self.load(type_url)
                except TransportError:
                    if self.stat() != stat:  # changed while it was read: look again
                        event = True
                        continue
                    settler.done(stat)
                    self._last = stat
                    raise
                if self.stat() != stat:
                    event = True
                    continue
                settler.done(stat)
                self._last = stat
                return raw, message
            if wake is not None and wake.is_set():
                return b"", None
            event = await self._wait(due, wake)

    async def _wait(self, due: float | None, wake: asyncio.Event | None) -> bool:
        """Until a change event (True), the periodic check, ``due`` on the clock or ``wake``."""
        waits: list[Awaitable[Any]] = [self.next_change()]
        if due is not None:
            waits.append(self.clock.sleep_until(due))
        if wake is not None:
            waits.append(wake.wait())
        futures = [asyncio.ensure_future(w) for w in waits]
        try:
            await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for future in futures:
                if not future.done():
                    future.cancel()
        change = futures[0]
        return change.done() and not change.cancelled() and bool(change.result())

    def load(self, type_url: str) -> tuple[bytes, Any]:
        """The file's bytes and the response they hold, for a stream of ``type_url``."""
        try:
            size = os.stat(self.path).st_size
            if size > self._limit:
                raise TransportError(
                    f"{self.path}: {size} bytes exceed max_receive_message_length ({self._limit})"
                )
            with open(self.path, "rb") as file:
                raw = file.read(self._limit + 1)
        except OSError as exc:
            raise TransportError(f"{self.path}: {exc.strerror or exc}") from None
        if not raw.strip():
            raise TransportError(f"{self.path}: the file is empty, not a DiscoveryResponse")
        try:
            message = parse_response(raw, self._kind)
        except FormatError as exc:
            raise TransportError(f"{self.path}: not a valid DiscoveryResponse: {exc}") from None
        if not message.type_url:
            raise TransportError(f"{self.path}: the DiscoveryResponse has no type_url")
        if message.type_url != type_url:
            raise TransportError(f"{self.path}: holds {message.type_url}, not {type_url}")
        if not message.version_info:
            message.version_info = hashlib.sha256(raw).hexdigest()[:12]
        message.nonce = f"file-{next(self._nonces)}"
        return raw, message

    async def next_change(self) -> bool:
        """Until something changes in the watched directory (True) or the periodic check is due
        (False)."""
        import watchfiles

        watcher = watchfiles.awatch(
            self.directory,
            debounce=20,
            step=5,
            rust_timeout=self._poll_ms,
            yield_on_timeout=True,
            recursive=False,
        )
        try:
            changes = await anext(watcher)
        finally:
            await watcher.aclose()
        return bool(changes)


class FileStream:
    """One "stream" over the file: its content now, then each new content."""

    def __init__(
        self, transport: FileTransport, type_url: str, first: Any, raw: bytes, settler: Settler
    ) -> None:
        self._transport = transport
        self._type_url = type_url
        self._pending: Any = first
        self._raw = raw
        self._settler = settler
        self._closed = False
        self._names: list[str] | None = None  # the names of the last request
        self._resend = False  # new names were requested: hand out the content again
        self._wake = asyncio.Event()
        self._versions: dict[str, str] = {}  # nonce -> version of responses not yet answered

    @property
    def waiting_until(self) -> float | None:
        """When an in-place write being waited on may be read (the clock's time), or None."""
        return self._settler.waiting_until

    async def write(self, request: Any) -> None:
        if self._closed:
            raise TransportError(f"{self._transport.path}: the stream is closed")
        names = list(request.resource_names)
        if self._names is not None and names != self._names:
            self._resend = True
            self._wake.set()
        self._names = names
        rejected = self._versions.pop(request.response_nonce, None)
        if request.HasField("error_detail"):
            logger.warning(
                "%s: rejected version %s (keeping %s): %s",
                self._transport.path,
                rejected if rejected is not None else "(unknown)",
                request.version_info or "no version",
                request.error_detail.message,
            )

    async def read(self) -> Any:
        if self._pending is not None:
            message, self._pending = self._pending, None
            return self._handed_out(message)
        transport = self._transport
        while True:
            if self._closed:
                raise TransportError(f"{transport.path}: the stream is closed")
            self._wake.clear()
            resend = self._resend
            raw, message = await transport.read_complete(
                self._type_url, self._settler, wait_for_change=not resend, wake=self._wake
            )
            if message is None:  # woken: closed, or new names want the content again
                continue
            if raw != self._raw or resend:
                self._raw = raw
                self._resend = False
                return self._handed_out(message)

    def _handed_out(self, message: Any) -> Any:
        """Remember the version of a response handed to the session, for its NACK's log line."""
        versions = self._versions
        if len(versions) >= 16:  # answers are owed in order; an ignored one is not answered
            del versions[next(iter(versions))]
        versions[message.nonce] = message.version_info
        return message

    def close(self) -> None:
        self._closed = True
        self._wake.set()
