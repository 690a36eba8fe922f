"""A ``DiscoveryResponse`` read from bytes in any of Envoy's file formats.

Why one place: the file source reads binary, text, JSON and YAML files, and the REST source
reads JSON bodies; all resolve ``Any`` payloads through the xds-protos descriptor pool, which
knows a message type only once its module is imported. `parse_response` imports the package of
each type it meets (``envoy.extensions.filters.http.router.v3`` for a ``Router``) and tries
again, so any type xds-protos ships can appear in a file, without importing all of them up
front. Errors say where the parser stopped.
"""

from __future__ import annotations

import enum
import importlib
import json
import pkgutil
import re
from typing import Any, assert_never

from .._errors import XdsError

__all__ = ["FORMATS", "FileFormat", "FormatError", "dump_response", "format_of", "parse_response"]


class FileFormat(enum.StrEnum):
    """How a ``DiscoveryResponse`` is written in a file or a body (a string enum: its values
    are the names error messages and logs show)."""

    BINARY = "binary"
    TEXT = "text"
    JSON = "json"
    YAML = "yaml"


#: File extension -> format, as Envoy chooses it.
FORMATS = {
    ".pb": FileFormat.BINARY,
    ".pb_text": FileFormat.TEXT,
    ".textproto": FileFormat.TEXT,
    ".txtpb": FileFormat.TEXT,
    ".json": FileFormat.JSON,
    ".yaml": FileFormat.YAML,
    ".yml": FileFormat.YAML,
}
_MAX_DEPTH = 100  # protobuf's own default recursion limit for JSON and text
_UNKNOWN_TYPE = re.compile(
    r"(?:type_url|type URL|message descriptor)[^:]*:\s*(?:type\.googleapis\.com/)?([\w.]+)"
)
_tried: set[str] = set()


class FormatError(XdsError):
    """The bytes are not a DiscoveryResponse in the expected format; says where and why."""


def format_of(path: str) -> FileFormat:
    """The format of a file from its extension; raises `FormatError` for an unknown one."""
    for suffix, kind in FORMATS.items():
        if path.endswith(suffix):
            return kind
    known = ", ".join(FORMATS)
    raise FormatError(f"{path}: unknown extension (expected one of {known})")


def parse_response(data: bytes, kind: FileFormat, *, delta: bool = False) -> Any:
    """A ``DiscoveryResponse`` (or ``DeltaDiscoveryResponse``) from ``data`` in format ``kind``."""
    from envoy.service.discovery.v3 import discovery_pb2

    message_class = (
        discovery_pb2.DeltaDiscoveryResponse if delta else discovery_pb2.DiscoveryResponse
    )
    for _ in range(64):  # each retry imports one more package
        message = message_class()
        try:
            _parse_into(message, data, kind)
        except FormatError as exc:
            missing = _missing_type(str(exc))
            if missing is None or not _import_package_of(missing):
                raise
            continue
        return message
    raise FormatError("too many unknown message types")


def _parse_into(message: Any, data: bytes, kind: FileFormat) -> None:
    from google.protobuf import json_format, text_format

    try:
        if kind is FileFormat.BINARY:
            message.ParseFromString(data)
        elif kind is FileFormat.TEXT:
            text_format.Parse(data.decode("utf-8"), message)
        elif kind is FileFormat.JSON:
            json_format.Parse(data.decode("utf-8"), message, max_recursion_depth=_MAX_DEPTH)
        elif kind is FileFormat.YAML:
            json_format.ParseDict(_yaml(data), message, max_recursion_depth=_MAX_DEPTH)
        else:
            assert_never(kind)
    except FormatError:
        raise
    except UnicodeDecodeError as exc:
        raise FormatError(f"not UTF-8 text: {exc}") from None
    except RecursionError:
        raise FormatError(f"nested deeper than {_MAX_DEPTH} levels") from None
    except Exception as exc:  # every parser has its own error types; all mean "not valid"
        raise FormatError(_first_line(exc)) from None


def _yaml(data: bytes) -> Any:
    try:
        import yaml
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise FormatError("YAML files need PyYAML: pip install 'xdsclient[files]'") from None
    try:
        document = yaml.safe_load(data)
    except yaml.YAMLError as exc:
        raise FormatError(_first_line(exc).replace("\n", " ")) from None
    if not isinstance(document, dict):
        raise FormatError("the document is not a mapping (a DiscoveryResponse)")
    # Round-trip through JSON: YAML's dates and non-string keys are not proto3 JSON.
    try:
        result: Any = json.loads(json.dumps(document, default=str))
    except (TypeError, ValueError) as exc:
        raise FormatError(str(exc)) from None
    return result


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n"))
    return text or type(exc).__name__


def _missing_type(message: str) -> str | None:
    markers = ("Can not find", "Could not find", "Invalid Any type", "not found")
    if not any(marker in message for marker in markers):
        return None
    match = _UNKNOWN_TYPE.search(message)
    return match.group(1) if match else None


def _import_package_of(full_name: str) -> bool:
    """Import every ``*_pb2`` module of the package that defines ``full_name``; False when
    there is nothing new to import."""
    package = full_name.rsplit(".", 1)[0]
    if package in _tried:
        return False
    _tried.add(package)
    try:
        module = importlib.import_module(package)
    except ImportError:
        return False
    for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
        if info.name.endswith("_pb2"):
            importlib.import_module(f"{package}.{info.name}")
    return True


def dump_response(message: Any, kind: FileFormat) -> bytes:
    """``message`` (a DiscoveryResponse) in format ``kind``: the inverse of `parse_response`."""
    from google.protobuf import json_format, text_format

    if kind is FileFormat.BINARY:
        data: bytes = message.SerializeToString()
        return data
    if kind is FileFormat.TEXT:
        return text_format.MessageToString(message).encode()
    as_json = json_format.MessageToJson(message, indent=2)
    if kind is FileFormat.JSON:
        return as_json.encode()
    if kind is FileFormat.YAML:
        import yaml

        return yaml.safe_dump(json.loads(as_json), sort_keys=False).encode()
    assert_never(kind)
