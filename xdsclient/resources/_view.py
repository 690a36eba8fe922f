"""What every validated resource view shares: its wire bytes, lazy protobuf, equality, errors.

Why: a view holds what a data-plane client needs, already validated, plus the serialized
resource it came from. The protobuf message is decoded again from those bytes on demand, so the
cache never holds two copies; two views are equal exactly when their resources are byte-equal.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .._errors import ResourceDecodeError

__all__ = ["View", "invalid", "parse"]


class View:
    """Base of the validated views: ``raw`` bytes, a lazy ``proto``, equality by bytes."""

    __slots__ = ()
    raw: bytes
    _message_class: ClassVar[Any]

    @property
    def proto(self) -> Any:
        """The resource's protobuf message, decoded afresh from ``raw`` on each access."""
        return self._message_class.FromString(self.raw)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.raw == other.raw

    def __hash__(self) -> int:
        return hash((type(self), self.raw))

    def to_dataclass(self) -> Any:
        """The same resource as an ``envoy-data-plane`` (betterproto2) object.

        Needs the ``dataclasses`` extra (``pip install xdsclient[dataclasses]``); it is imported
        only here, never on the hot path (it decodes about 300 times slower than upb).
        """
        full_name: str = self._message_class.DESCRIPTOR.full_name
        try:
            import importlib

            package, _, message = full_name.rpartition(".")
            module = importlib.import_module("envoy_data_plane." + package)
        except ImportError as exc:
            raise ImportError(
                "to_dataclass() needs the optional 'dataclasses' extra: "
                "pip install 'xdsclient[dataclasses]'"
            ) from exc
        return getattr(module, message).parse(self.raw)


def parse(message_class: Any, data: bytes) -> Any:
    """Parse ``data``, mapping protobuf's error to ours."""
    try:
        return message_class.FromString(data)
    except Exception as exc:  # google.protobuf.message.DecodeError, a foreign type
        raise ResourceDecodeError(
            f"cannot parse {message_class.DESCRIPTOR.full_name}: {exc}"
        ) from exc


def invalid(name: str, path: str, reason: str) -> ResourceDecodeError:
    """The error for field ``path`` of resource ``name``: ``"path: reason"``."""
    return ResourceDecodeError(f"{path}: {reason}" if path else reason, name=name)
