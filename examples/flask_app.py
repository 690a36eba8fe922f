"""A Flask service that reads its configuration from xDS, with no event loop of its own.

`SyncXdsClient` runs the client on a background thread. Request handlers read the latest value
straight from it (`get`, `get_config`: the first read waits, the next ones answer at once), and a
watcher callback, run on a thread of its own, hears of each change. Here the handlers report the
routing configuration of the demo listener and the circuit-breaker limit of the ``web`` cluster;
the embedded test control plane changes that limit while the service runs. One handler calls
another service, ``reviews.svc``, with ``httpx.Client`` over `XdsSyncTransport`: proxyless
HTTP, routed to the ``reviews`` cluster's endpoints by the ``edge`` listener's routes.

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
from xdsclient.httpx import XdsSyncTransport
from xdsclient.resources import CLUSTER
from xdsclient.sync import LoopThread, SyncXdsClient
from xdsclient.testing import ControlPlane, HttpBackend, builders, demo_resources

LISTENER = "shop.example.com"


def create_app(xds: SyncXdsClient, upstream: httpx.Client) -> Flask:
    """The service: every handler reads the configuration through ``xds``; ``upstream`` calls
    other services, by xDS too."""
    app = Flask(__name__)

    @app.get("/products/<int:product>/reviews")
    def reviews(product: int) -> Any:
        answer = upstream.get(f"http://reviews.svc/api/v1/products/{product}", timeout=5)
        return jsonify({"status": answer.status_code, "from": answer.json()["backend"]})

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


def edge(reviews: HttpBackend) -> list[Any]:
    """The ``edge`` listener: ``reviews.svc`` goes to the ``reviews`` cluster, whose one
    endpoint is ``reviews``."""
    return [
        builders.api_listener("edge"),
        builders.route_configuration("edge-routes", "reviews", domains=["reviews.svc"]),
        builders.cluster("reviews"),
        builders.cluster_load_assignment("reviews", [reviews.address]),
    ]


async def start_servers() -> tuple[ControlPlane, HttpBackend]:
    """The embedded test control plane serving the demo configuration and ``edge``, and a
    backend for ``reviews``; a real service points `SyncXdsClient` at its own control plane
    (or bootstrap) instead."""
    reviews = HttpBackend("reviews-1")
    await reviews.start()
    plane = ControlPlane()
    await plane.start()
    plane.set_all([*demo_resources(LISTENER), web_cluster(100), *edge(reviews)])
    return plane, reviews


async def stop_servers(plane: ControlPlane, reviews: HttpBackend) -> None:
    await plane.stop()
    await reviews.stop()


def serve_and_ask(
    app: Flask, plane_thread: LoopThread, plane: ControlPlane, changed: threading.Event
) -> list[str]:
    """Serve ``app`` with werkzeug's threads and ask it what it knows, before and after the
    control plane changes the ``web`` cluster."""
    lines = []
    server = make_server("127.0.0.1", 0, app, threaded=True)
    serving = threading.Thread(target=server.serve_forever)
    serving.start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.server_port}") as http:
            lines.append(f"clusters: {', '.join(http.get('/clusters').json())}")
            lines.append(f"limit: {http.get('/limit').json()['max_requests']}")
            plane_thread.call(plane.set, web_cluster(200))  # the control plane changes it
            if not changed.wait(5):
                raise RuntimeError("the change did not arrive")
            lines.append(f"limit after the change: {http.get('/limit').json()['max_requests']}")
            reviews = http.get("/products/7/reviews").json()
            lines.append(f"reviews: {reviews['status']} from {reviews['from']}")
    finally:
        server.shutdown()
        serving.join()
    return lines


def main() -> list[str]:
    lines: list[str] = []
    # The servers need a loop; a LoopThread gives them one beside this synchronous program.
    with LoopThread(name="servers") as plane_thread:
        plane, backend = plane_thread.run(start_servers())
        with SyncXdsClient(plane.address, node_id="flask-example") as xds:
            changed = threading.Event()

            def on_change(event: Event) -> None:  # on the watcher's own thread, never the loop's
                if isinstance(event, ResourceChanged) and event.value.max_requests == 200:
                    changed.set()

            xds.add_watcher(CLUSTER, "web", CallbackWatcher(on_change))
            # One client for every request thread, its transport on the xDS client's loop thread.
            with httpx.Client(transport=XdsSyncTransport("edge", client=xds)) as upstream:
                lines += serve_and_ask(create_app(xds, upstream), plane_thread, plane, changed)
        plane_thread.run(stop_servers(plane, backend))
    for line in lines:
        print(line)
    return lines


if __name__ == "__main__":
    main()
