"""The filesystem transport: a watched file holding a ``DiscoveryResponse`` (Envoy's
``path_config_source``), behind the same `Transport` interface as gRPC.

Why a transport and not a separate path: the session, cache, watchers and config walk stay the
same for every source; a file is a stream that "sends" its content whenever it changes:
- `open` reads and parses the file; a missing, unreadable, oversized or unparsable file is a
  `TransportError` naming it (the session then records it on every resource and keeps the last
  good values). After such a failure `open` waits for the file to change before reading again.
- `read` returns the content read at `open`, then waits for a change (inotify, through
  `watchfiles`, on the file's directory so atomic moves are seen; or on ``watched_directory``)
  and returns the new content. Content equal to what was last returned is skipped. Content that
  no longer parses ends the stream with the error; the next `open` reports it.
- Requests are the session's ACKs and NACKs; there is no one to send them to. A NACK (a rejected
  resource) is logged, and the session has already reported it to watchers as a NACK would.
A periodic check (every ``poll_interval`` seconds) of the file's size, time and inode backs up
the event stream, so a change is never missed even when an event is.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import os
from typing import TYPE_CHECKING, Any

from .._errors import TransportError
from ._base import StreamSpec
from ._formats import FormatError, format_of, parse_response

if TYPE_CHECKING:
    from .._options import ClientOptions
    from .._sources import FileSource

__all__ = ["FileStream", "FileTransport"]

logger = logging.getLogger("xdsclient.transport.file")

_Stat = tuple[int, int, int] | None  # (inode, size, mtime_ns); None: no file


class FileTransport:
    """Streams over one watched file."""

    def __init__(
        self, source: FileSource, options: ClientOptions, *, poll_interval: float = 1.0
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
        self._kind = format_of(source.path)
        self._limit = options.max_receive_message_length
        self._poll_ms = max(1, int(poll_interval * 1000))
        self._failed: _Stat | str | None = None  # the stat of the last failed read
        self._nonces = itertools.count(1)

    async def open(self, spec: StreamSpec) -> FileStream:
        if spec.delta or spec.type_url is None:
            raise TransportError(f"{self.path}: a file serves one type, state of the world")
        if self._failed is not None:
            while self.stat() == self._failed:
                await self.next_change()
        stat = self.stat()
        try:
            raw, message = self.load(spec.type_url)
        except TransportError:
            self._failed = stat if stat is not None else "missing"
            raise
        self._failed = None
        return FileStream(self, spec.type_url, message, raw, stat)

    async def close(self) -> None:
        """Nothing to release: each wait for a change ends with it."""

    # ------------------------------------------------------------------ file access

    def stat(self) -> _Stat:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

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
        try:
            message = parse_response(raw, self._kind)
        except FormatError as exc:
            raise TransportError(f"{self.path}: not a valid DiscoveryResponse: {exc}") from None
        if not message.type_url:
            message.type_url = type_url
        elif message.type_url != type_url:
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
        self, transport: FileTransport, type_url: str, first: Any, raw: bytes, stat: _Stat
    ) -> None:
        self._transport = transport
        self._type_url = type_url
        self._pending: Any = first
        self._raw = raw
        self._stat = stat
        self._closed = False
        self._names: list[str] | None = None  # the names of the last request
        self._resend = False  # new names were requested: hand out the content again
        self._wake = asyncio.Event()

    async def write(self, request: Any) -> None:
        if self._closed:
            raise TransportError(f"{self._transport.path}: the stream is closed")
        names = list(request.resource_names)
        if self._names is not None and names != self._names:
            self._resend = True
            self._wake.set()
        self._names = names
        if request.HasField("error_detail"):
            logger.warning(
                "%s: rejected version %s: %s",
                self._transport.path,
                request.version_info or "(none accepted yet)",
                request.error_detail.message,
            )

    async def read(self) -> Any:
        if self._pending is not None:
            message, self._pending = self._pending, None
            return message
        transport = self._transport
        changed = False
        while True:
            if self._closed:
                raise TransportError(f"{transport.path}: the stream is closed")
            stat = transport.stat()
            if changed or self._resend or stat != self._stat:
                raw, message = transport.load(self._type_url)  # a bad file ends the stream
                self._stat = stat
                if raw != self._raw or self._resend:
                    self._raw = raw
                    self._resend = False
                    return message
            changed = await self._next_change()

    async def _next_change(self) -> bool:
        """Until the file may have changed (True when an event says so) or new names want the
        content again."""
        self._wake.clear()
        change = asyncio.ensure_future(self._transport.next_change())
        wake = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({change, wake}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for future in (change, wake):
                if not future.done():
                    future.cancel()
        if change.done() and not change.cancelled():
            return change.result()
        return False

    def close(self) -> None:
        self._closed = True
        self._wake.set()
