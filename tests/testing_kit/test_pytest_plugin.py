"""The pytest plugin, run in pytest subprocesses as a user would: fixtures against a server
named on the command line or in the environment, NACK assertions that name the resource, and
clear errors for bad settings and a missing pytest-asyncio."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import cluster
from tests.testing_kit.runner import INI, run_pytest
from xdsclient.testing import ControlPlane

USER_TEST = """
import pytest
from xdsclient.resources import CLUSTER

pytestmark = pytest.mark.asyncio

async def test_the_cluster_arrives_without_nacks(xds_client, xds_recorder, xds_settings):
    view = await xds_client.wait_for(CLUSTER, "c", timeout=10)
    assert view.name == "c"
    assert xds_settings.external
    print("variant", xds_settings.variant, "delta", xds_client.options.delta)
    xds_recorder.assert_no_nacks()
"""

NACKED_TEST = """
import pytest
from xdsclient import CallbackWatcher
from xdsclient.resources import CLUSTER

@pytest.mark.asyncio
async def test_nothing_is_nacked(xds_client, xds_recorder):
    xds_client.add_watcher(CLUSTER, "c", CallbackWatcher(lambda event: None))
    await xds_recorder.answer(CLUSTER.type_url)
    xds_recorder.assert_no_nacks()
"""


@pytest.fixture
def user_test(tmp_path: Path) -> Path:
    (tmp_path / "test_user.py").write_text(USER_TEST)
    (tmp_path / "pytest.ini").write_text(INI)
    return tmp_path


async def test_xds_client_tests_the_server_given_by_option_or_environment(
    cp: ControlPlane, user_test: Path
) -> None:
    code, out = await run_pytest(
        user_test, "--xds-server", cp.address, "--xds-variant", "xds-delta"
    )
    assert code == 0, out
    assert "variant xds-delta delta True" in out
    code, out = await run_pytest(user_test, env={"XDS_SERVER": cp.address})
    assert code == 0, out
    assert "variant ads-sotw delta False" in out


async def test_a_nack_fails_the_test_naming_the_resource_and_the_reason(
    cp: ControlPlane, user_test: Path
) -> None:
    bad = cluster("c")
    bad.eds_cluster_config.eds_config.path_config_source.path = "/x"
    cp.set(bad)
    (user_test / "test_user.py").write_text(NACKED_TEST)
    code, out = await run_pytest(user_test, "--xds-server", cp.address)
    assert code == 1, out
    assert "the client NACKed 1 response(s)" in out
    assert 'Cluster "c"' in out
    assert "eds_config" in out


async def test_bad_settings_are_usage_errors(user_test: Path) -> None:
    code, out = await run_pytest(user_test, env={"XDS_SERVER": "a:1", "XDS_BOOTSTRAP": "b.json"})
    assert code == 4, out  # pytest's usage error
    assert "not both" in out
    code, out = await run_pytest(user_test, env={"XDS_SERVER": "a:1", "XDS_VARIANT": "sotw"})
    assert code == 4, out
    assert "XDS_VARIANT must be one of" in out


async def test_without_pytest_asyncio_the_fixtures_say_what_is_missing(user_test: Path) -> None:
    (user_test / "pytest_asyncio.py").write_text('raise ImportError("not installed")\n')
    (user_test / "test_user.py").write_text("def test_uses_the_client(xds_client):\n    pass\n")
    code, out = await run_pytest(
        user_test,
        "-p",
        "xdsclient.testing.pytest_plugin",
        env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": str(user_test)},
    )
    assert code == 1, out
    assert "the xdsclient fixtures need pytest-asyncio" in out
