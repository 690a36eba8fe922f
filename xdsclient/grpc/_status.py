"""The call path's statuses as grpc.aio raises them, and grpc.aio's failures as attempt outcomes.

Why one place: a call that fails before any attempt (no route, a fault abort, a failed pick, the
deadline) must look to the caller exactly like one a server failed: a `grpc.aio.AioRpcError`
with gRPC's code and details. And an attempt's failure must reach the retry rules as data
(`AttemptOutcome`): its code, its details and the server's ``grpc-retry-pushback-ms``.
"""

from __future__ import annotations

import grpc

from .._call import AttemptOutcome, Code, Status
from .._plane import resource_details

__all__ = ["PUSHBACK", "outcome_of", "resource_details", "rpc_error", "status_code"]

#: The trailer a server asks for a retry delay with (gRFC A6).
PUSHBACK = "grpc-retry-pushback-ms"
_BY_VALUE = {code.value[0]: code for code in grpc.StatusCode}


def status_code(code: Code) -> grpc.StatusCode:
    """grpc's enum member for a call-path code."""
    return _BY_VALUE[int(code)]


def rpc_error(status: Status) -> grpc.aio.AioRpcError:
    """The error grpc.aio raises for a call that ended with ``status`` before a server
    answered (no metadata, as grpc.aio gives a call its channel failed)."""
    return grpc.aio.AioRpcError(
        code=status_code(status.code),
        initial_metadata=grpc.aio.Metadata(),
        trailing_metadata=grpc.aio.Metadata(),
        details=status.details,
        debug_error_string=None,
    )


def outcome_of(error: grpc.aio.AioRpcError, *, committed: bool) -> AttemptOutcome:
    """An attempt's outcome from the error grpc.aio raised for it."""
    pushback = None
    trailing = error.trailing_metadata()
    if trailing is not None:
        value = trailing.get(PUSHBACK)
        if value is not None:
            pushback = value if isinstance(value, str) else value.decode("latin-1")
    code = Code(error.code().value[0])
    return AttemptOutcome(
        code=code, details=error.details() or "", committed=committed, pushback=pushback
    )


#: the status C-core gives a call whose metadata it refused after the call began receiving
#: its status (a stream: grpc.aio asks for the status first), before any pick
_REFUSED_DETAILS = "Invalid metadata"
_REFUSED_DEBUG = "INTERNAL:Invalid metadata"


def refused_by_core(details: str | None, debug: str | None) -> bool:
    """Whether a call's INTERNAL status of ``details`` and debug string ``debug`` is C-core's
    own refusal of its metadata (the call never sent, never picked), not a server's answer
    (whose debug string says it came from the peer)."""
    return details == _REFUSED_DETAILS and debug == _REFUSED_DEBUG
