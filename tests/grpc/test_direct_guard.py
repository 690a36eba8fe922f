"""The guard on grpc.aio's private parts: direct unary calls are made only when every private
part `DirectCall` relies on is there with the shape it expects (else unary calls are
`XdsCall`s, checked by the `unary_path` fixture's "fallback" runs)."""

from __future__ import annotations

import importlib
import types
from typing import Any

import pytest

from xdsclient.grpc import _direct

_CALL = importlib.import_module("grpc.aio._call")
_CHANNEL = importlib.import_module("grpc.aio._channel")
_COMMON = importlib.import_module("grpc._common")
_CYGRPC = importlib.import_module("grpc._cython.cygrpc")


def _with(module: Any, **replaced: Any) -> types.SimpleNamespace:
    """``module``'s public and private names, some replaced (None: left out)."""
    names = {name: getattr(module, name) for name in dir(module)}
    names.update(replaced)
    return types.SimpleNamespace(**{k: v for k, v in names.items() if v is not None})


class _OtherConstructor(_CALL.UnaryUnaryCall):  # type: ignore[misc,name-defined]
    def __init__(self, request: Any, deadline: Any, metadata: Any, *rest: Any) -> None:
        super().__init__(request, deadline, metadata, *rest)


class _NoInvoke(_CALL.UnaryUnaryCall):  # type: ignore[misc,name-defined]
    _invoke = None


class _OtherMultiCallable(_CHANNEL.UnaryUnaryMultiCallable):  # type: ignore[misc,name-defined]
    def __init__(self) -> None:  # sets none of the attributes `DirectCall` reads
        pass


def test_this_grpcio_has_what_the_direct_call_relies_on() -> None:
    """With the installed grpcio the guard passes: unary calls are direct."""
    assert _direct._usable(_CALL, _CHANNEL, _COMMON, _CYGRPC)
    assert _direct.USABLE


@pytest.mark.parametrize(
    "changed",
    [
        "no-call-module",
        "no-cython-module",
        "call-constructor",
        "no-invoke",
        "multicallable-attributes",
        "no-serialize",
        "no-cython-status",
    ],
)
def test_a_private_part_missing_or_reshaped_turns_direct_calls_off(changed: str) -> None:
    """A grpc.aio without one of the private parts, or with one of another shape, fails the
    guard."""
    call: Any = _CALL
    channel: Any = _CHANNEL
    common: Any = _COMMON
    cygrpc: Any = _CYGRPC
    if changed == "no-call-module":
        call = None
    elif changed == "no-cython-module":
        cygrpc = None
    elif changed == "call-constructor":
        call = _with(_CALL, UnaryUnaryCall=_OtherConstructor)
    elif changed == "no-invoke":
        call = _with(_CALL, UnaryUnaryCall=_NoInvoke)
    elif changed == "multicallable-attributes":
        channel = _with(_CHANNEL, UnaryUnaryMultiCallable=_OtherMultiCallable)
    elif changed == "no-serialize":
        common = _with(_COMMON, serialize=None)
    else:
        cygrpc = _with(_CYGRPC, _AioCall=type("_AioCall", (), {"unary_unary": None}))
    assert not _direct._usable(call, channel, common, cygrpc)
