"""XXH64 with seed 0, the hash of gRPC's ring (gRFC A42), from the `xxhash` binding.

Why optional: only ring hash needs it, so it lives in the ``lb`` extra; `xxh64` raises
`MissingExtraError` naming the extra when it is not installed (``import xdsclient.lb`` itself
works without it).
"""

from __future__ import annotations

from collections.abc import Callable

from .. import MissingExtraError

__all__ = ["require_xxh64", "xxh64"]

_digest: Callable[[bytes], int] | None
try:
    from xxhash import xxh64_intdigest as _digest
except ImportError:  # pragma: no cover - exercised in a subprocess without xxhash
    _digest = None


def require_xxh64() -> Callable[[bytes], int]:
    """The XXH64 (seed 0) function; `MissingExtraError` when `xxhash` is not installed."""
    if _digest is None:
        raise MissingExtraError("ring hash needs the xxhash package: pip install 'xdsclient[lb]'")
    return _digest


def xxh64(data: bytes) -> int:
    """XXH64 of ``data`` with seed 0, as an unsigned 64-bit integer."""
    return require_xxh64()(data)
