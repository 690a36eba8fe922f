"""A Flask service that reads its configuration from xDS, with no event loop of its own.

`SyncXdsClient` runs the client on a background thread. Request handlers read the latest value
straight from it (`get`, `get_config`: the first read waits, the next ones answer at once), and a
watcher callback, run on a thread of its own, hears of each change. Here the handlers report the
routing configuration of the demo listener and the circuit-breaker limit of the ``web`` cluster;
the embedded test control plane changes that limit while the service runs.

    python examples/flask_app.py
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
from envoy.config.cluster.v3 import cluster_pb2
from flask import Flask, jsonify
from werkzeug.serving import make_server

from xdsclient import CallbackWatcher, Event, ResourceChanged
from xdsclient.resources import CLUSTER
from xdsclient.sync import LoopThread, SyncXdsClient
from xdsclient.testing import ControlPlane, demo_resources

LISTENER = "shop.example.com"


def create_app(xds: SyncXdsClient) -> Flask:
    """The service: every handler reads the configuration through ``xds``."""
    app = Flask(__name__)

    @app.get("/clusters")
    def clusters() -> Any:
        config = xds.get_config(LISTENER, timeout=5)
        return jsonify(sorted(config.clusters))

    @app.get("/limit")
    def limit() -> Any:
        web = xds.get(CLUSTER, "web", timeout=5)
        return jsonify({"cluster": web.name, "max_requests": web.max_requests})

    return app


def web_cluster(max_requests: int) -> cluster_pb2.Cluster:
    cluster = cluster_pb2.Cluster(name="web", type=cluster_pb2.Cluster.EDS)
    cluster.eds_cluster_config.eds_config.ads.SetInParent()
    cluster.circuit_breakers.thresholds.add().max_requests.value = max_requests
    return cluster


async def start_control_plane() -> ControlPlane:
    """The embedded test control plane serving the demo configuration; a real service points
    `SyncXdsClient` at its own control plane (or bootstrap) instead."""
    plane = ControlPlane()
    await plane.start()
    plane.set_all([*demo_resources(LISTENER), web_cluster(100)])
    return plane


def main() -> list[str]:
    lines: list[str] = []
    # The control plane needs a loop; a LoopThread gives it one beside this synchronous program.
    with LoopThread(name="control-plane") as plane_thread:
        plane = plane_thread.run(start_control_plane())
        with SyncXdsClient(plane.address, node_id="flask-example") as xds:
            changed = threading.Event()

            def on_change(event: Event) -> None:  # on the watcher's own thread, never the loop's
                if isinstance(event, ResourceChanged) and event.value.max_requests == 200:
                    changed.set()

            xds.add_watcher(CLUSTER, "web", CallbackWatcher(on_change))
            server = make_server("127.0.0.1", 0, create_app(xds), threaded=True)
            serving = threading.Thread(target=server.serve_forever)
            serving.start()
            try:
                with httpx.Client(base_url=f"http://127.0.0.1:{server.server_port}") as http:
                    lines.append(f"clusters: {', '.join(http.get('/clusters').json())}")
                    lines.append(f"limit: {http.get('/limit').json()['max_requests']}")
                    plane_thread.call(plane.set, web_cluster(200))  # the control plane changes it
                    if not changed.wait(5):
                        raise RuntimeError("the change did not arrive")
                    lines.append(
                        f"limit after the change: {http.get('/limit').json()['max_requests']}"
                    )
            finally:
                server.shutdown()
                serving.join()
        plane_thread.run(plane.stop())
    for line in lines:
        print(line)
    return lines


if __name__ == "__main__":
    main()
