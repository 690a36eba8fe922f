"""The bootstrap's ``certificate_providers`` (gRFC A29): named sources of TLS certificates.

Why validated like gRPC: a cluster's ``UpstreamTlsContext`` names these instances, and gRPC
rejects a bootstrap whose entry it cannot use (an unknown ``plugin_name``, a ``file_watcher``
with a certificate but no key) rather than failing later, at a connection. ``file_watcher`` is
the one plugin gRPC ships, and the only one here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from .._validators import positive as _positive
from ._servers import BootstrapError

__all__ = ["CertificateProviderConfig", "parse_certificate_providers"]

FILE_WATCHER = "file_watcher"
#: gRPC's default ``refresh_interval``: ten minutes
DEFAULT_REFRESH_INTERVAL = 600.0
_DURATION = re.compile(r"^(\d+)(\.\d{1,9})?s$")


@attrs.frozen(kw_only=True)
class CertificateProviderConfig:
    """One ``certificate_providers`` instance: a ``file_watcher`` that reads PEM files.

    ``certificate_file`` and ``private_key_file`` (the identity) are both set or both unset;
    at least one of ``certificate_file`` and ``ca_certificate_file`` is set. The files are read
    again once ``refresh_interval`` seconds have passed since the last read.
    """

    plugin_name: str = FILE_WATCHER
    certificate_file: str | None = None
    private_key_file: str | None = None
    ca_certificate_file: str | None = None
    refresh_interval: float = attrs.field(default=DEFAULT_REFRESH_INTERVAL, validator=_positive)

    def __attrs_post_init__(self) -> None:
        if self.plugin_name != FILE_WATCHER:
            raise ValueError(f"Unrecognized plugin name: {self.plugin_name}")
        if (self.certificate_file is None) != (self.private_key_file is None):
            raise ValueError(
                'fields "certificate_file" and "private_key_file" must be both set or both unset'
            )
        if self.certificate_file is None and self.ca_certificate_file is None:
            raise ValueError(
                'at least one of "certificate_file" and "ca_certificate_file" must be specified'
            )


def parse_certificate_providers(data: Any) -> dict[str, CertificateProviderConfig]:
    """``certificate_providers``: instance name -> its validated configuration."""
    if not isinstance(data, Mapping):
        raise BootstrapError("certificate_providers: must be an object")
    return {
        name: _provider(value, f"certificate_providers[{name!r}]") for name, value in data.items()
    }


def _provider(data: Any, path: str) -> CertificateProviderConfig:
    if not isinstance(data, Mapping):
        raise BootstrapError(f"{path}: must be an object")
    plugin = data.get("plugin_name")
    if not isinstance(plugin, str):
        raise BootstrapError(f"{path}.plugin_name: required, a string")
    if plugin != FILE_WATCHER:
        raise BootstrapError(f"{path}.plugin_name: Unrecognized plugin name: {plugin}")
    config = data.get("config", {})
    where = f"{path}.config"
    if not isinstance(config, Mapping):
        raise BootstrapError(f"{where}: must be an object")
    files: dict[str, str] = {}
    for key in ("certificate_file", "private_key_file", "ca_certificate_file"):
        if key in config:
            value = config[key]
            if not isinstance(value, str):
                raise BootstrapError(f"{where}.{key}: must be a string")
            if value:  # gRPC treats an empty path as unset
                files[key] = value
    interval = _duration(config, "refresh_interval", where)
    try:
        return CertificateProviderConfig(plugin_name=plugin, refresh_interval=interval, **files)
    except ValueError as exc:
        raise BootstrapError(f"{where}: {exc}") from None


def _duration(config: Mapping[str, Any], key: str, path: str) -> float:
    """A protobuf JSON duration (``"600s"``, ``"1.5s"``), as gRPC's bootstrap writes them."""
    if key not in config:
        return DEFAULT_REFRESH_INTERVAL
    value = config[key]
    match = _DURATION.match(value) if isinstance(value, str) else None
    if match is None:
        raise BootstrapError(f'{path}.{key}: must be a duration string such as "600s"')
    seconds = float(match.group(1) + (match.group(2) or ""))
    if seconds <= 0:
        raise BootstrapError(f"{path}.{key}: must be positive")
    return seconds
