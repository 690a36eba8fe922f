"""Proxyless HTTP: `XdsTransport`, an httpx transport whose requests are routed, retried,
fault-injected, balanced and load-reported as the xDS configuration says (Envoy's HTTP router's
rules), for ``httpx.AsyncClient``; `XdsSyncTransport`, the same for ``httpx.Client`` (it runs
an `XdsTransport` on a background event-loop thread).

Beside the client, as ``grpc`` is: it builds on the public API, the call path
(`xdsclient._call`), its asyncio shell (`xdsclient._plane`) and `xdsclient.lb`, and the client
never imports it. It needs the ``httpx`` extra (``pip install 'xdsclient[httpx]'``). A request
answered locally names why in the `ERROR_HEADER` response header.
"""

from __future__ import annotations

try:
    import httpx as _httpx  # noqa: F401
except ImportError as error:  # pragma: no cover - the extra is installed in the suite
    raise ImportError(
        "xdsclient.httpx needs the httpx extra: pip install 'xdsclient[httpx]'"
    ) from error

from .._call import ERROR_HEADER
from ._sync import XdsSyncTransport
from ._transport import XdsTransport

__all__ = ["ERROR_HEADER", "XdsSyncTransport", "XdsTransport"]

for _name in __all__:
    _value = globals()[_name]
    if getattr(_value, "__module__", "").startswith(__name__ + "."):
        _value.__module__ = __name__
