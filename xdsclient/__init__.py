"""xdsclient: an asyncio xDS client library, the data-plane side of xDS.

The public API is re-exported here; every other module is private.
"""

from __future__ import annotations

# First: importing it decides whether the compiled modules load as Python (before any of them is).
from . import _compiled

# isort: split

from ._client import XdsClient
from ._errors import (
    ClientClosedError,
    MissingExtraError,
    ProtocolError,
    ResourceDecodeError,
    ResourceDoesNotExistError,
    ResourceError,
    ResourceExpiredError,
    ResourceTimeoutError,
    ResourceValidationError,
    ServerResourceError,
    TransportError,
    WaitTimeoutError,
    XdsError,
)
from ._observe._csds import add_csds_service
from ._observe._events import (
    ChannelClosed,
    ConnectivityChanged,
    LoadReportingChanged,
    Observer,
    ProtocolEvent,
    RequestSent,
    ResourceUpdate,
    ResponseReceived,
)
from ._observe._stats import ClientStats, ServerStats, TypeStats
from ._protocol import (
    AmbientError,
    DataError,
    Event,
    ProtocolOptions,
    ResourceChanged,
    ResourceState,
    ResourceStatus,
    Session,
)
from ._protocol._load_store import (
    ClusterLoad,
    ClusterLoadReport,
    LoadStore,
    LocalityLoadReport,
    MetricLoad,
)
from ._runtime._clock import Clock
from ._settings._bootstrap import load_bootstrap
from ._settings._config import (
    AuthorityConfig,
    Backoff,
    BootstrapError,
    CertificateProviderConfig,
    ChannelCredentials,
    ClientConfig,
    Locality,
    NodeConfig,
    ServerConfig,
)
from ._settings._options import ClientOptions
from ._settings._sources import FileSource, RestSource
from ._transports import Stream, StreamSpec, Transport, TransportFactory
from ._version import __version__ as __version__
from ._watch._config_watch import ConfigUpdate, ConfigWatch
from ._watch._dependencies import ClusterConfig, XdsConfig
from ._watch._dynamic_clusters import ClusterSubscription
from ._watch._resolve import Available, Missing, Outcome, TimedOut
from ._watch._watchers import CallbackWatcher, ResourceWatcher, Watch, WatchHandle
from ._xdstp import InvalidNameError, XdstpName
from .resources import ResourceType

__all__ = [
    "AmbientError",
    "AuthorityConfig",
    "Available",
    "Backoff",
    "BootstrapError",
    "CallbackWatcher",
    "CertificateProviderConfig",
    "ChannelClosed",
    "ChannelCredentials",
    "ClientClosedError",
    "ClientConfig",
    "ClientOptions",
    "ClientStats",
    "Clock",
    "ClusterConfig",
    "ClusterLoad",
    "ClusterLoadReport",
    "ClusterSubscription",
    "ConfigUpdate",
    "ConfigWatch",
    "ConnectivityChanged",
    "DataError",
    "Event",
    "FileSource",
    "InvalidNameError",
    "LoadReportingChanged",
    "LoadStore",
    "Locality",
    "LocalityLoadReport",
    "MetricLoad",
    "Missing",
    "MissingExtraError",
    "NodeConfig",
    "Observer",
    "Outcome",
    "ProtocolError",
    "ProtocolEvent",
    "ProtocolOptions",
    "RequestSent",
    "ResourceChanged",
    "ResourceDecodeError",
    "ResourceDoesNotExistError",
    "ResourceError",
    "ResourceExpiredError",
    "ResourceState",
    "ResourceStatus",
    "ResourceTimeoutError",
    "ResourceType",
    "ResourceUpdate",
    "ResourceValidationError",
    "ResourceWatcher",
    "ResponseReceived",
    "RestSource",
    "ServerConfig",
    "ServerResourceError",
    "ServerStats",
    "Session",
    "Stream",
    "StreamSpec",
    "TimedOut",
    "Transport",
    "TransportError",
    "TransportFactory",
    "TypeStats",
    "WaitTimeoutError",
    "Watch",
    "WatchHandle",
    "XdsClient",
    "XdsConfig",
    "XdsError",
    "XdstpName",
    "add_csds_service",
    "compiled",
    "load_bootstrap",
]

#: Whether the hot modules of the EDS update path run compiled with mypyc, as the wheels built
#: for release ship them; False from the sdist, on a platform without a wheel, or with
#: ``XDSCLIENT_PURE=1`` (which runs them as Python). ``xdsclient --version`` says the same.
compiled: bool = _compiled.is_compiled()


for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = __name__
del _name, _obj
