"""Every example runs, and says what it should."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).parent.parent / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


async def test_watch_cluster_prints_each_change() -> None:
    lines = await load("watch_cluster").main(updates=3)
    assert lines == [
        "backend v1: eds cluster, endpoints from 'backend', max_requests=100",
        "backend v2: eds cluster, endpoints from 'backend', max_requests=200",
        "backend v3: eds cluster, endpoints from 'backend', max_requests=300",
    ]


async def test_embedded_service_routes_by_the_latest_configuration() -> None:
    answers = await load("embedded_service").main()
    assert answers == [
        "/api/cart -> api (4 endpoints)",
        "/index.html -> web (2 endpoints)",
        "/api/cart -> web (2 endpoints)",
        "/v2/api/cart -> api (4 endpoints)",
    ]


async def test_custom_load_balancer_follows_weights_priorities_and_health() -> None:
    results = await load("custom_load_balancer").main(calls=40)
    healthy = results["all healthy"]
    assert set(healthy) == {"a", "b", "c"}
    assert 24 <= healthy["a"] + healthy["b"] <= 36  # zone-a 3 : zone-b 1, a seeded draw
    assert results["c unhealthy"] == {"a": 20, "b": 20}  # round robin within zone-a
    assert results["priority 0 down"] == {"fallback": 40}


async def test_grpc_aio_balancer_fails_over_and_back_with_real_backends() -> None:
    results = await load("grpc_aio_balancer").main(calls=20)
    assert results["all up"] == {"a": 10, "b": 10}  # round robin in priority 0
    assert results["priority 0 down"] == {"fallback": 20}
    assert results["a back"] == {"a": 20}


async def test_http_transport_splits_pins_and_answers_404_itself() -> None:
    results = await load("http_transport").main(requests=200)
    split = results["split"]
    assert split["stable"] + split["canary"] == 200
    assert 5 <= split["canary"] <= 40  # 10% of 200, within 4 standard deviations
    assert results["pinned"] == {"canary": 20}
    status, why = results["no virtual host"]
    assert status == 404
    assert "ratings.svc" in why


async def test_xds_channel_splits_and_pins_calls_of_a_stub() -> None:
    results = await load("xds_channel").main(calls=200)
    split = results["split"]
    assert split["stable"] + split["canary"] == 200
    assert 5 <= split["canary"] <= 40  # 10% of 200, a seeded draw
    assert results["x-canary: yes"] == {"canary": 10}


async def test_custom_policy_sends_nearly_every_call_to_the_quicker_backend() -> None:
    """The example's least-latency policy, registered and named by the cluster, balances a
    real stub's calls: the backend 20 ms slower gets only the first try and a few
    explorations (5%, a seeded draw)."""
    answered = await load("custom_policy").main(calls=60)
    assert answered["fast"] + answered["slow"] == 60
    assert answered["fast"] >= 50


def test_control_plane_test_passes_under_pytest() -> None:
    import subprocess

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(EXAMPLES / "control_plane_test.py"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout


async def test_control_plane_test_runs_against_another_server_without_the_embedded_one() -> None:
    """``--xds-server``: the tests that only read run against that server, the ones that
    change the configuration skip themselves, and no embedded control plane is started (the
    example's demo fixture asks for one only when it is the server under test)."""
    import asyncio

    from xdsclient.testing import ControlPlane, demo_resources

    async with ControlPlane() as server:
        server.set_all(demo_resources("shop.example.com"))
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--setup-show",
            str(EXAMPLES / "control_plane_test.py"), "--xds-server", server.address,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await asyncio.wait_for(process.communicate(), 120)
    text = out.decode()
    assert process.returncode == 0, text
    assert "3 passed, 1 skipped" in text
    assert "xds_control_plane" not in text  # --setup-show lists every fixture set up


async def test_mixed_sources_walk_one_configuration_from_files_rest_and_grpc() -> None:
    lines = await load("mixed_sources").main()
    assert lines == [
        "api: aggregate of api-primary, api-secondary",
        "api-primary: 1 localities",
        "api-secondary: 1 localities",
        "web: 1 localities",
    ]


async def test_metrics_example_reads_a78_metrics_and_envoy_stats() -> None:
    lines = await load("metrics").main()
    assert lines == [
        "cds.update_success=1 version=1",
        "grpc.xds_client.connected{} 1",
        "grpc.xds_client.resource_updates_valid{grpc.xds.resource_type="
        "envoy.config.cluster.v3.Cluster} 1",
        "grpc.xds_client.resources{grpc.xds.authority=#old,grpc.xds.cache_state=acked,"
        "grpc.xds.resource_type=envoy.config.cluster.v3.Cluster} 1",
    ]


def test_flask_app_serves_the_latest_configuration_without_an_event_loop() -> None:
    """The Flask example's handlers read through SyncXdsClient from werkzeug's threads, follow
    a change the control plane makes while it serves, and call a backend through
    XdsSyncTransport."""
    lines = load("flask_app").main()
    assert lines == [
        "clusters: api, api-primary, api-secondary, web",
        "limit: 100",
        "limit after the change: 200",
        "reviews: 200 from reviews-1",
    ]
