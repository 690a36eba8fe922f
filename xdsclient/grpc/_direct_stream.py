"""The direct server-streaming call: grpc.aio's own stream to the picked endpoint, as a subclass.

Why: a server-streaming call whose route decides only its cluster (`ChannelCore.direct`) has
a plan of one attempt with nothing to wait out, as the usual unary call has. Driving it costs a
task, a queue between that task and the reader, and a turn of the loop per message. When the
channel has its configuration and the pick completes at once, the call is picked and sent as
it is made (grpc.aio's call starts then too) and the caller gets a `DirectStream`: grpc.aio's
``UnaryStreamCall`` itself (as `DirectCall` is its unary call), read as grpc.aio's, with the
bookkeeping of its end (the pick's outcome and circuit breaking to the picker, ORCA, load
reporting, the connection's count of calls) done in one done callback of its Cython call
(`DirectBase`, shared with `DirectCall`), which runs however the stream ends: read to its
end, cancelled, past its deadline, failed, never read (it ends at its deadline: gRPC gives
the status once the messages are read), ended by the channel's close, or refused by gRPC as
it is sent (metadata it rejects before the call has a status: its sending task ends the call
then). Any other case is an `XdsCall`, handed the pick already made so that no draw is
repeated.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Callable
from types import MethodType
from typing import Any

from . import _direct
from ._core import CLOSED
from ._direct import _CALL_PARAMETERS, DirectBase, _serialize, direct_call
from ._status import rpc_error

__all__ = ["DirectStream", "stream_call"]

#: grpc.aio's server-streaming call class (private to grpc.aio, untyped)
_AioUnaryStreamCall: Any = getattr(_direct._aio_call, "UnaryStreamCall", None)
#: whether what `DirectStream` adds to `DirectCall`'s private parts (`_direct.USABLE`) is
#: there with the shape it expects: else every server-streaming call is an `XdsCall`
_SHAPED = (
    _AioUnaryStreamCall is not None
    and tuple(inspect.signature(_AioUnaryStreamCall.__init__).parameters) == _CALL_PARAMETERS
    and inspect.iscoroutinefunction(getattr(_AioUnaryStreamCall, "_send_unary_request", None))
    and inspect.iscoroutinefunction(getattr(_AioUnaryStreamCall, "_raise_for_status", None))
    and hasattr(importlib.import_module("grpc._cython.cygrpc")._AioCall, "initiate_unary_stream")
)
if not _SHAPED:
    _AioUnaryStreamCall = object


class DirectStream(DirectBase, _AioUnaryStreamCall):  # type: ignore[misc]  # grpc.aio's, untyped
    """A direct server-streaming call: grpc.aio's own ``unary_stream`` call on the picked
    endpoint's channel, made by `_send` from grpc.aio's multi-callable for it, whose end's
    bookkeeping is one done callback on its Cython call (`DirectBase`)."""

    __slots__ = ()
    _KIND = (False, True)
    _SHAPED = _SHAPED  # the check above

    async def _send_unary_request(self) -> None:
        """grpc.aio's sending of the request, which also ends a call gRPC refuses to send (a
        ``-bin`` key with a text value, `DirectBase._not_sent`) and gives the reader the
        error."""
        cython = self._cython_call
        try:
            await cython.initiate_unary_stream(
                _serialize(self._request, self._request_serializer), self._metadata, self._context
            )
        except asyncio.CancelledError:
            if not cython.cancelled():
                self.cancel()
            raise
        except BaseException:
            self._not_sent()
            raise

    async def _raise_for_status(self) -> None:
        """grpc.aio's end of a read past the last message: the channel's close is CANCELLED
        ``Channel closed!`` (an `AioRpcError`, as from a planned call), not `CancelledError`."""
        if self._closed:
            raise rpc_error(CLOSED)
        await super()._raise_for_status()


#: the channel's server-streaming calls: `direct_call` bound to `DirectStream`
stream_call: Callable[..., Any] = MethodType(direct_call, DirectStream)
