"""The xdsclient pytest plugin: fixtures to test a control plane, or a service embedding xdsclient.

Installed with xdsclient and loaded by pytest automatically (entry point ``pytest11``); it needs
pytest-asyncio for its async fixtures (a clear failure names it when missing).

Fixtures:

- ``xds_control_plane``: an embedded `ControlPlane` on 127.0.0.1, empty; set resources on it.
  Started only for tests that use it (``xds_client`` does when no server under test is named).
- ``xds_client``: a started `XdsClient` connected to the server under test (``--xds-server
  HOST:PORT`` or ``--xds-bootstrap FILE``, or the ``XDS_SERVER`` / ``XDS_BOOTSTRAP``
  environment variables; the embedded ``xds_control_plane`` when neither is given), with
  ``xds_recorder`` attached. ``--xds-node-id`` / ``XDS_NODE_ID`` and ``--xds-variant`` /
  ``XDS_VARIANT`` (``ads-sotw``, ``ads-delta``, ``xds-sotw``, ``xds-delta``) choose the node and
  the transport variant.
- ``xds_client_factory``: ``await xds_client_factory(node_id=..., metadata=...)`` makes more
  started clients of the server under test (`ClientFactory`), all closed at teardown.
- ``xds_server``: the server under test as a child process (`ServerProcess`) when
  ``--xds-server-command CMD`` / ``XDS_SERVER_COMMAND`` names one: started once per session,
  ready when its port accepts connections, stopped at the end; a failing test's report shows
  its output. None otherwise.
- ``xds_variant``: the variant of this test: ``--xds-variant``, or each of the marker's
  ``@pytest.mark.xds_variants("ads-sotw", ...)`` (no names: all four) in turn.
- ``xds_recorder``: a `ProtocolRecorder` of everything ``xds_client`` sends and receives:
  ``xds_recorder.assert_no_nacks()``, ``xds_recorder.first_update(...)`` for latencies.
- ``xds_settings``: the resolved settings (`XdsTestSettings`); override the fixture in a
  conftest to set them in code.
- ``xds_check``: runs the conformance rules (`xdsclient.conformance.check`) against the server
  under test: ``report = await xds_check(variants=["ads-delta"]); assert report.ok``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import attrs
import pytest

from ._client_factory import VARIANTS, ClientFactory, make_client
from ._recorder import ProtocolRecorder
from ._server_process import ServerProcess, ServerStartError, free_port

__all__ = ["VARIANTS", "ClientFactory", "ServerProcess", "XdsTestSettings"]

_PORT = "{port}"


@attrs.frozen
class XdsTestSettings:
    """Where ``xds_client`` connects and how (None server and bootstrap: the embedded one)."""

    server: str | None = None
    bootstrap: str | None = None
    node_id: str = "xdsclient-pytest"
    variant: str = "ads-sotw"
    #: the server under test's command line (``{port}`` already replaced), run by ``xds_server``
    command: str | None = None
    #: seconds the command has to accept connections on ``server``'s port
    start_timeout: float = 30.0

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
    group.addoption(
        "--xds-server-command",
        help="start the server under test with this command for the session; {port} in it is"
        " replaced by a free port, else give --xds-server (env XDS_SERVER_COMMAND)",
    )
    group.addoption(
        "--xds-server-start-timeout",
        type=float,
        help="seconds the command has to listen (default 30; env XDS_SERVER_START_TIMEOUT)",
    )


def settings_from(config: pytest.Config) -> XdsTestSettings:
    """Options first, then environment variables, then defaults."""

    def pick(option: str, env: str) -> str | None:
        value = config.getoption(option, default=None)
        return str(value) if value not in (None, "") else os.environ.get(env) or None

    server, bootstrap = pick("--xds-server", "XDS_SERVER"), pick("--xds-bootstrap", "XDS_BOOTSTRAP")
    if server and bootstrap:
        raise pytest.UsageError("give --xds-server or --xds-bootstrap, not both")
    variant = pick("--xds-variant", "XDS_VARIANT") or "ads-sotw"
    if variant not in VARIANTS:
        raise pytest.UsageError(f"XDS_VARIANT must be one of {', '.join(sorted(VARIANTS))}")
    command = pick("--xds-server-command", "XDS_SERVER_COMMAND")
    if command is not None:
        server, command = _command_address(command, server, bootstrap)
    return XdsTestSettings(
        server=server,
        bootstrap=bootstrap,
        node_id=pick("--xds-node-id", "XDS_NODE_ID") or "xdsclient-pytest",
        variant=variant,
        command=command,
        start_timeout=_start_timeout(
            pick("--xds-server-start-timeout", "XDS_SERVER_START_TIMEOUT")
        ),
    )


def _command_address(command: str, server: str | None, bootstrap: str | None) -> tuple[str, str]:
    """The address the command's server listens on, and the command with its port filled in."""
    if bootstrap is not None:
        raise pytest.UsageError("--xds-server-command goes with --xds-server, not --xds-bootstrap")
    if server is None:
        if _PORT not in command:
            raise pytest.UsageError(
                "--xds-server-command needs {port} in the command or --xds-server HOST:PORT"
            )
        server = f"127.0.0.1:{free_port()}"
    _host, port = _split(server)
    return server, command.replace(_PORT, str(port))


def _split(server: str) -> tuple[str, int]:
    host, _, port = server.rpartition(":")
    if not host or not port.isdigit():
        raise pytest.UsageError(f"--xds-server must be HOST:PORT, not {server!r}")
    return host.strip("[]"), int(port)


def _start_timeout(value: str | None) -> float:
    try:
        timeout = 30.0 if value is None else float(value)
    except ValueError:
        timeout = -1.0
    if not timeout > 0:
        raise pytest.UsageError(f"the server start timeout must be a positive number: {value!r}")
    return timeout


_SETTINGS = pytest.StashKey[XdsTestSettings]()
_PROCESS = pytest.StashKey[ServerProcess]()
_MARKER = "xds_variants"


def pytest_configure(config: pytest.Config) -> None:
    """Resolve the settings once, so bad ones stop the run before any test (a usage error)."""
    config.stash[_SETTINGS] = settings_from(config)
    config.addinivalue_line(
        "markers",
        f"{_MARKER}(*names): run the test once per xDS variant named (none: all of"
        f" {', '.join(VARIANTS)})",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``@pytest.mark.xds_variants(...)``: the test once per variant, through ``xds_variant``."""
    marker = metafunc.definition.get_closest_marker(_MARKER)
    if marker is None:
        return
    names = [str(name) for name in marker.args] or list(VARIANTS)
    unknown = [name for name in names if name not in VARIANTS]
    if unknown:
        pytest.fail(
            f"{metafunc.definition.nodeid}: unknown xDS variant(s) {', '.join(unknown)};"
            f" known: {', '.join(VARIANTS)}",
            pytrace=False,
        )
    metafunc.parametrize("xds_variant", names, indirect=True, ids=names)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failing test's report shows what the server under test printed."""
    report = yield
    process = item.config.stash.get(_PROCESS, None)
    if report.failed and process is not None:
        report.sections.append((f"xds server output ({process.log})", process.output()))
    return report


@pytest.fixture
def xds_settings(pytestconfig: pytest.Config) -> XdsTestSettings:
    """The resolved settings for ``xds_client``."""
    return pytestconfig.stash[_SETTINGS]


@pytest.fixture(scope="session")
def xds_server(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess | None]:
    """The server under test started from ``--xds-server-command`` (None without one)."""
    settings = pytestconfig.stash[_SETTINGS]
    if settings.command is None or settings.server is None:
        yield None
        return
    host, port = _split(settings.server)
    log = tmp_path_factory.mktemp("xds-server") / "output.log"
    process = ServerProcess(settings.command, host=host, port=port, log=log)
    failure = None
    try:
        process.start(settings.start_timeout)
    except ServerStartError as exc:
        failure = f"the server under test did not start: {exc}"
    if failure is not None:
        pytest.fail(failure, pytrace=False)
    pytestconfig.stash[_PROCESS] = process
    try:
        yield process
    finally:
        del pytestconfig.stash[_PROCESS]
        process.stop()


@pytest.fixture
def xds_variant(request: pytest.FixtureRequest, xds_settings: XdsTestSettings) -> str:
    """This test's variant: the marker's parameter, else ``--xds-variant``."""
    return str(getattr(request, "param", xds_settings.variant))


@pytest.fixture
def _xds_target(request: pytest.FixtureRequest, xds_settings: XdsTestSettings) -> str | None:
    """HOST:PORT of the server under test (None: the bootstrap names it). Starts the command's
    server, or the embedded control plane, only when that is the server under test."""
    if xds_settings.command is not None:
        request.getfixturevalue("xds_server")
    if xds_settings.external:
        return xds_settings.server
    return str(request.getfixturevalue("xds_control_plane").address)


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
    xds_settings: XdsTestSettings,
    xds_recorder: ProtocolRecorder,
    xds_variant: str,
    _xds_target: str | None,
) -> AsyncIterator[Any]:
    """A started client of the server under test, recorded by ``xds_recorder``."""
    client = make_client(
        server=_xds_target,
        bootstrap=xds_settings.bootstrap,
        variant=xds_variant,
        node_id=xds_settings.node_id if _xds_target is not None else None,
        metadata=None,
        options={},
    )
    xds_recorder.attach(client)
    async with client:
        yield client
    xds_recorder.detach()


@_async_fixture
async def xds_client_factory(
    xds_settings: XdsTestSettings, xds_variant: str, _xds_target: str | None
) -> AsyncIterator[ClientFactory]:
    """Makes started clients of the server under test (`ClientFactory`); closes them all."""
    factory = ClientFactory(
        server=_xds_target,
        bootstrap=xds_settings.bootstrap,
        variant=xds_variant,
        node_id=xds_settings.node_id,
    )
    try:
        yield factory
    finally:
        await factory.aclose()


@pytest.fixture
def xds_check(
    xds_settings: XdsTestSettings, _xds_target: str | None
) -> Callable[..., Awaitable[Any]]:
    """``await xds_check(**options)``: the conformance `Report` for the server under test
    (options as `xdsclient.conformance.check` takes them)."""

    async def run(**options: Any) -> Any:
        from ..conformance import check

        server = _xds_target
        if server is None and xds_settings.bootstrap is not None:
            from .._settings._bootstrap import load_bootstrap

            server = load_bootstrap(xds_settings.bootstrap).servers[0].uri
        assert server is not None
        return await check(server, **options)

    return run


for _cls in (ClientFactory, ServerProcess, XdsTestSettings):
    _cls.__module__ = __name__
