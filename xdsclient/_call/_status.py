"""gRPC status codes and the status a decision fails a call with, without importing grpc.

Why here: the call path decides statuses (a route that fails, a fault that aborts, the deadline
that passes) before any front end exists, and both front ends read them: the gRPC channel raises
them as they are, the HTTP transport maps them. The codes are gRPC's (``grpc/status.h``); the
HTTP-to-gRPC mapping is gRPC's documented one (``doc/http-grpc-status-mapping.md``), which gRFC
A33 names for a fault filter's ``http_status``.
"""

from __future__ import annotations

import enum

import attrs

__all__ = ["OK_STATUS", "Code", "Status", "grpc_code_from_http", "grpc_code_from_int"]


class Code(enum.IntEnum):
    """gRPC's status codes, by their wire value."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


@attrs.frozen(kw_only=True)
class Status:
    """A call's final status: the code and the details string the caller sees."""

    code: Code
    details: str = ""


#: The status of every call that succeeds (one shared value: a status is immutable).
OK_STATUS = Status(code=Code.OK)


#: doc/http-grpc-status-mapping.md: every other HTTP status is UNKNOWN (200 included).
_HTTP_TO_GRPC = {
    400: Code.INTERNAL,
    401: Code.UNAUTHENTICATED,
    403: Code.PERMISSION_DENIED,
    404: Code.UNIMPLEMENTED,
    429: Code.UNAVAILABLE,
    502: Code.UNAVAILABLE,
    503: Code.UNAVAILABLE,
    504: Code.UNAVAILABLE,
}


def grpc_code_from_http(http_status: int) -> Code:
    """The gRPC code for an HTTP status, as gRPC maps a response without ``grpc-status``."""
    return _HTTP_TO_GRPC.get(http_status, Code.UNKNOWN)


def grpc_code_from_int(value: int) -> Code:
    """The code for a wire value; out of range is UNKNOWN (C-core's
    ``grpc_status_code_from_int``)."""
    try:
        return Code(value)
    except ValueError:
        return Code.UNKNOWN
