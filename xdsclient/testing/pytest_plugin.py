"""The xdsclient pytest plugin: fixtures to test a control plane, or a service embedding xdsclient.

Installed with xdsclient and loaded by pytest automatically (entry point ``pytest11``); it needs
pytest-asyncio for its async fixtures (a clear failure names it when missing).

Fixtures:

- ``xds_control_plane``: an embedded `ControlPlane` on 127.0.0.1, empty; set resources on it.
- ``xds_client``: a started `XdsClient` connected to the server under test (``--xds-server
  HOST:PORT`` or ``--xds-bootstrap FILE``, or the ``XDS_SERVER`` / ``XDS_BOOTSTRAP``
  environment variables; the embedded ``xds_control_plane`` when neither is given), with
  ``xds_recorder`` attached. ``--xds-node-id`` / ``XDS_NODE_ID`` and ``--xds-variant`` /
  ``XDS_VARIANT`` (``ads-sotw``, ``ads-delta``, ``xds-sotw``, ``xds-delta``) choose the node and
  the transport variant.
- ``xds_recorder``: a `ProtocolRecorder` of everything ``xds_client`` sends and receives:
  ``xds_recorder.assert_no_nacks()``, ``xds_recorder.first_update(...)`` for latencies.
- ``xds_settings``: the resolved settings (`XdsTestSettings`).
- ``xds_check``: runs the conformance rules (`xdsclient.conformance.check`) against the server
  under test: ``report = await xds_check(variants=["ads-delta"]); assert report.ok``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import attrs
import pytest

from ._recorder import ProtocolRecorder

__all__ = ["VARIANTS", "XdsTestSettings"]

#: variant name -> (ads, delta)
VARIANTS: dict[str, tuple[bool, bool]] = {
    "ads-sotw": (True, False),
    "ads-delta": (True, True),
    "xds-sotw": (False, False),
    "xds-delta": (False, True),
}


@attrs.frozen
class XdsTestSettings:
    """Where ``xds_client`` connects and how (None server and bootstrap: the embedded one)."""

    server: str | None = None
    bootstrap: str | None = None
    node_id: str = "xdsclient-pytest"
    variant: str = "ads-sotw"

    @property
    def external(self) -> bool:
        """Whether a server under test was named (else the embedded control plane serves)."""
        return self.server is not None or self.bootstrap is not None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("xdsclient", "xDS control-plane testing (xdsclient)")
    group.addoption("--xds-server", help="the xDS server under test, HOST:PORT (env XDS_SERVER)")
    group.addoption(
        "--xds-bootstrap", help="a gRPC xDS bootstrap naming the server (env XDS_BOOTSTRAP)"
    )
    group.addoption("--xds-node-id", help="node id for xds_client (env XDS_NODE_ID)")
    group.addoption(
        "--xds-variant", choices=sorted(VARIANTS), help="transport variant (env XDS_VARIANT)"
    )


def settings_from(config: pytest.Config) -> XdsTestSettings:
    """Options first, then environment variables, then defaults."""

    def pick(option: str, env: str) -> str | None:
        value = config.getoption(option, default=None)
        return str(value) if value else os.environ.get(env) or None

    server, bootstrap = pick("--xds-server", "XDS_SERVER"), pick("--xds-bootstrap", "XDS_BOOTSTRAP")
    if server and bootstrap:
        raise pytest.UsageError("give --xds-server or --xds-bootstrap, not both")
    variant = pick("--xds-variant", "XDS_VARIANT") or "ads-sotw"
    if variant not in VARIANTS:
        raise pytest.UsageError(f"XDS_VARIANT must be one of {', '.join(sorted(VARIANTS))}")
    return XdsTestSettings(
        server=server,
        bootstrap=bootstrap,
        node_id=pick("--xds-node-id", "XDS_NODE_ID") or "xdsclient-pytest",
        variant=variant,
    )


_SETTINGS = pytest.StashKey[XdsTestSettings]()


def pytest_configure(config: pytest.Config) -> None:
    """Resolve the settings once, so bad ones stop the run before any test (a usage error)."""
    config.stash[_SETTINGS] = settings_from(config)


@pytest.fixture
def xds_settings(pytestconfig: pytest.Config) -> XdsTestSettings:
    """The resolved settings for ``xds_client``."""
    return pytestconfig.stash[_SETTINGS]


@pytest.fixture
def xds_recorder() -> ProtocolRecorder:
    """Records what ``xds_client`` sends and receives."""
    return ProtocolRecorder()


_MISSING = "the xdsclient fixtures need pytest-asyncio: pip install pytest-asyncio"


def _async_fixture(function: Callable[..., AsyncIterator[Any]]) -> Any:
    """``function`` as a pytest-asyncio fixture; without pytest-asyncio, a fixture of the same
    name that fails the test saying so."""
    try:
        import pytest_asyncio
    except ImportError:

        @pytest.fixture(name=function.__name__)
        def missing() -> Any:
            pytest.fail(_MISSING)

        return missing
    return pytest_asyncio.fixture(function)


@_async_fixture
async def xds_control_plane() -> AsyncIterator[Any]:
    """An embedded control plane on 127.0.0.1 (empty: set resources on it)."""
    from ._control_plane import ControlPlane

    async with ControlPlane() as control_plane:
        yield control_plane


@_async_fixture
async def xds_client(
    xds_settings: XdsTestSettings, xds_recorder: ProtocolRecorder, xds_control_plane: Any
) -> AsyncIterator[Any]:
    """A started client of the server under test, recorded by ``xds_recorder``."""
    from .._client import XdsClient

    ads, delta = VARIANTS[xds_settings.variant]
    if xds_settings.bootstrap is not None:
        client = XdsClient(bootstrap=xds_settings.bootstrap, ads=ads, delta=delta)
    else:
        server = xds_settings.server or xds_control_plane.address
        client = XdsClient(server, node_id=xds_settings.node_id, ads=ads, delta=delta)
    xds_recorder.attach(client)
    async with client:
        yield client
    xds_recorder.detach()


@pytest.fixture
def xds_check(
    xds_settings: XdsTestSettings, xds_control_plane: Any
) -> Callable[..., Awaitable[Any]]:
    """``await xds_check(**options)``: the conformance `Report` for the server under test
    (options as `xdsclient.conformance.check` takes them)."""

    async def run(**options: Any) -> Any:
        from ..conformance import check

        server = xds_settings.server
        if server is None and xds_settings.bootstrap is not None:
            from .._bootstrap import load_bootstrap

            server = load_bootstrap(xds_settings.bootstrap).servers[0].uri
        return await check(server or xds_control_plane.address, **options)

    return run
