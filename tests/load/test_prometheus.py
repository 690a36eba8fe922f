"""The Prometheus endpoint (``--metrics-port``): scraped while a real run goes on, it shows the
clients by state, the counters and every histogram so far; it listens on 127.0.0.1 unless told
otherwise, and a taken port is one clear error."""

from __future__ import annotations

import asyncio
import socket
import sys
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.children import stop_child
from tests.cli.helpers import ENV, cli, one_error_line
from tests.helpers import eventually
from xdsclient.load import Scenario, run
from xdsclient.load._prometheus import BOUNDS, MetricsError, MetricsServer


def scrape(url: str) -> dict[str, Any]:
    """Every sample of the endpoint, by name and labels (parsed by prometheus-client)."""
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    samples: dict[str, Any] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = sample.name + "".join(f"{{{k}={v}}}" for k, v in sorted(sample.labels.items()))
            samples[key] = sample.value
    return samples


async def scrape_until(url: str, done: Any, *, seconds: float = 10.0) -> dict[str, Any]:
    """Scrape until ``done(samples)``, for at most ``seconds``; the samples that did it."""

    async def scraped() -> dict[str, Any] | None:
        samples = await asyncio.to_thread(scrape, url)
        return samples if done(samples) else None

    result: dict[str, Any] = await eventually(scraped, seconds, what=f"{url} to show {done}")
    return result


async def test_a_scrape_during_the_run_shows_live_clients_counters_and_histograms(cp):
    """Before the run ends the endpoint has every client complete, and the first-config
    histogram with all of them: cumulative buckets that never go down, ``+Inf`` the count."""
    metrics = MetricsServer(0, total=20)
    metrics.start()
    try:
        scenario = Scenario(server=cp.address, listener="l", clients=20, duration=2.5)
        running = asyncio.create_task(run(scenario, on_progress=metrics))
        samples = await scrape_until(
            metrics.url,
            lambda s: s.get("xdsclient_load_first_config_seconds_count") == 20,
        )
        assert samples["xdsclient_load_done"] == 0  # seen while it ran
        result = await running
    finally:
        metrics.close()
    assert samples["xdsclient_load_clients{state=target}"] == 20
    assert samples["xdsclient_load_clients{state=started}"] == 20
    assert samples["xdsclient_load_clients{state=complete}"] == 20
    assert samples["xdsclient_load_nacks_total"] == 0
    assert "xdsclient_load_latest_seconds{measure=first_config}" in samples
    buckets = [samples[f"xdsclient_load_first_config_seconds_bucket{{le={b!r}}}"]
               for b in BOUNDS]  # fmt: skip
    assert buckets == sorted(buckets)
    assert samples["xdsclient_load_first_config_seconds_bucket{le=+Inf}"] == 20
    assert result.first_config.count == 20
    assert samples["xdsclient_load_first_config_seconds_sum"] == pytest.approx(
        result.first_config.sum
    )
    ack = samples["xdsclient_load_ack_latency_seconds_count"]
    assert 0 < ack <= result.ack_latency.count


def test_buckets_count_each_value_at_or_below_its_bound():
    """A value counts under every bound at or above it, and under none below it."""
    from xdsclient.load import Histogram, Progress

    histogram = Histogram()
    for value in (0.0004, 0.003, 0.003, 0.2, 45.0):
        histogram.record(value)
    metrics = MetricsServer(0)
    metrics(Progress(elapsed=1.0, started=1, connected=1, complete=1, reconnects=0, nacks=0,
                     errors=0, histograms={"connect": histogram}))  # fmt: skip
    family = next(f for f in metrics.collect() if f.name == "xdsclient_load_connect_seconds")
    counts = {s.labels["le"]: s.value for s in family.samples if s.name.endswith("_bucket")}
    assert counts["0.00025"] == 0
    assert counts["0.0005"] == 1
    assert counts["0.0025"] == 1
    assert counts["0.005"] == 3
    assert counts["0.25"] == 4
    assert counts["30.0"] == 4
    assert counts["60.0"] == counts["+Inf"] == 5


def test_it_listens_on_loopback_by_default():
    """Without a host the endpoint binds 127.0.0.1, never every address."""
    metrics = MetricsServer(0)
    metrics.start()
    try:
        assert metrics._server.server_address[0] == "127.0.0.1"
        assert metrics.url == f"http://127.0.0.1:{metrics.port}/metrics"
        assert scrape(metrics.url)["xdsclient_load_clients{state=target}"] == 0
    finally:
        metrics.close()


def test_a_taken_port_is_a_metrics_error():
    """A port something else listens on: `MetricsError` naming the option and the reason."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(MetricsError, match=rf"--metrics-port {port}: cannot listen on "
                           r"127.0.0.1: Address already in use"):  # fmt: skip
            MetricsServer(port).start()


async def test_the_command_serves_metrics_while_it_runs(cp):
    """``--metrics-port 0`` says where it listens on stderr, and a scrape there sees the run's
    clients while it goes on."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "xdsclient", "load", "--server", cp.address, "--listener", "l",
        "--clients", "6", "--duration", "3", "--metrics-port", "0",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=ENV,
    )  # fmt: skip
    assert process.stderr is not None
    try:
        line = (await asyncio.wait_for(process.stderr.readline(), 30)).decode()
        assert line.startswith("xdsclient load: metrics at http://127.0.0.1:"), line
        url = line.split(" at ", 1)[1].strip()
        samples = await scrape_until(
            url, lambda s: s.get("xdsclient_load_clients{state=complete}") == 6
        )
        assert samples["xdsclient_load_clients{state=target}"] == 6
        out, _ = await asyncio.wait_for(process.communicate(), 30)
    finally:
        await stop_child(process, grace=0)
    assert process.returncode == 0
    assert "clients 6  connected 6  complete 6" in out.decode()


async def test_a_taken_port_is_status_3_before_the_run():
    """``--metrics-port`` on a taken port: one line, status 3, and no run (the server here
    would be unreachable, status 4, had it started)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status, _, err = await cli("load", "--server", "127.0.0.1:1", "--listener", "l",
                                   "--metrics-port", str(port))  # fmt: skip
    assert status == 3
    assert f"--metrics-port {port}: cannot listen on 127.0.0.1" in one_error_line(err)
