"""One xDS client loading the benchmark config, run in its own process by bench/e2e.py.

    python bench/e2e_worker.py xdsclient|grpcio ADDRESS

It loads the listener, its route configuration, every cluster and every endpoint assignment,
keeps watching until its standard input closes, then prints its peak RSS (KiB) and exits.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))

import xds_config as cfg


async def run_xdsclient(address: str) -> None:
    from xdsclient import CallbackWatcher, Event, ResourceChanged, XdsClient
    from xdsclient.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE_CONFIGURATION

    async with XdsClient(address, node_id="bench-xdsclient") as client:
        clusters: set[str] = set()

        def on_endpoints(event: Event) -> None:
            pass

        def on_cluster(event: Event) -> None:
            if isinstance(event, ResourceChanged):
                client.add_watcher(
                    ENDPOINT, event.value.eds_service_name, CallbackWatcher(on_endpoints)
                )

        def on_route(event: Event) -> None:
            if isinstance(event, ResourceChanged):
                for name in event.value.clusters - clusters:
                    clusters.add(name)
                    client.add_watcher(CLUSTER, name, CallbackWatcher(on_cluster))

        def on_listener(event: Event) -> None:
            if isinstance(event, ResourceChanged):
                route = event.value.api_listener.route_config_name
                client.add_watcher(ROUTE_CONFIGURATION, route, CallbackWatcher(on_route))

        client.add_watcher(LISTENER, cfg.LISTENER, CallbackWatcher(on_listener))
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


def run_grpcio(address: str) -> None:
    bootstrap = {
        "xds_servers": [
            {
                "server_uri": address,
                "channel_creds": [{"type": "insecure"}],
                "server_features": ["xds_v3"],
            }
        ],
        "node": {"id": "bench-grpcio"},
    }
    os.environ["GRPC_XDS_BOOTSTRAP_CONFIG"] = json.dumps(bootstrap)
    import grpc

    channel = grpc.insecure_channel(f"xds:///{cfg.LISTENER}")
    states: list[Any] = []
    channel.subscribe(states.append, try_to_connect=True)
    sys.stdin.read()
    channel.close()


def main() -> None:
    kind, address = sys.argv[1], sys.argv[2]
    if kind == "xdsclient":
        asyncio.run(run_xdsclient(address))
    else:
        run_grpcio(address)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, flush=True)


if __name__ == "__main__":
    main()
