"""What every validated resource view shares: its wire bytes, lazy protobuf, equality, errors.

Why: a view holds what a data-plane client needs, already validated, plus the serialized
resource it came from. The protobuf message is decoded again from those bytes on demand, so the
cache never holds two copies; two views are equal exactly when their resources are byte-equal.
"""

from __future__ import annotations

from collections.abc import Set
from socket import AF_INET as _AF_INET
from socket import AF_INET6 as _AF_INET6
from socket import inet_pton as _inet_pton
from typing import Any, ClassVar

from .._errors import ResourceDecodeError

__all__ = ["View", "check_instance", "invalid", "metadata_dict", "parse", "unpack"]


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


def unpack(name: str, path: str, packed: Any, message_class: Any) -> Any:
    """The ``message_class`` inside ``packed`` (an Any), or the error for field ``path``."""
    full_name = message_class.DESCRIPTOR.full_name
    if packed.type_url.rsplit("/", 1)[-1] != full_name:
        raise invalid(name, path, f"must be of type {full_name.rsplit('.', 1)[-1]}")
    try:
        return message_class.FromString(packed.value)
    except Exception as exc:  # protobuf's DecodeError
        raise invalid(name, path, f"cannot parse {full_name}: {exc}") from exc


def metadata_dict(metadata: Any) -> dict[str, Any]:
    """``envoy.config.core.v3.Metadata.filter_metadata`` as plain Python values."""
    return {key: _struct(value) for key, value in metadata.filter_metadata.items()}


def _struct(struct: Any) -> dict[str, Any]:
    return {key: _value(value) for key, value in struct.fields.items()}


def _value(value: Any) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return _struct(value.struct_value)
    if kind == "list_value":
        return [_value(item) for item in value.list_value.values]
    if kind is None or kind == "null_value":
        return None
    return getattr(value, kind)


def invalid(name: str, path: str, reason: str) -> ResourceDecodeError:
    """The error for field ``path`` of resource ``name``: ``"path: reason"``."""
    return ResourceDecodeError(f"{path}: {reason}" if path else reason, name=name)


def check_instance(name: str, path: str, instance: str, providers: Set[str]) -> None:
    """C-core's check of a certificate provider instance a TLS context (upstream or
    downstream) names, against the instance names of the bootstrap's ``certificate_providers``:
    an unknown one is invalid at ``path.instance_name``."""
    if instance not in providers:
        raise invalid(
            name,
            f"{path}.instance_name",
            f"unrecognized certificate provider instance name: {instance}",
        )


def is_ip_address(host: str) -> bool:
    """Whether ``host`` is an IPv4 or IPv6 literal, as gRPC's C-core parses endpoint addresses:
    no names, no leading zeros or spaces; IPv6 may be bracketed and carry a zone (``%eth0``)."""
    try:
        _inet_pton(_AF_INET, host)
        return True
    except (OSError, ValueError):  # ValueError: an embedded NUL
        pass
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]  # C-core takes a bracketed IPv6 literal too
    try:
        _inet_pton(_AF_INET6, host.split("%", 1)[0])
        return True
    except (OSError, ValueError):
        return False
