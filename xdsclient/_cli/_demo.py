"""``xdsclient demo`` (watch the embedded demo until Ctrl-C or ``--updates N``) and
``xdsclient serve`` (run the demo's control plane for other tools: ``watch``, ``dump``, your
own service or grpcdebug, until Ctrl-C)."""

from __future__ import annotations

import argparse
import random

from ._common import OK, Command, positive_int


def _demo_arguments(parser: argparse.ArgumentParser) -> None:
    from .._demo import LISTENER

    parser.add_argument("--updates", type=positive_int, help="stop after this many")
    parser.add_argument("--bootstrap", help="a gRPC xDS bootstrap file: watch a real server")
    parser.add_argument("--listener", default=LISTENER, help=f"default {LISTENER}")
    parser.add_argument(
        "--source",
        choices=("grpc", "file", "rest"),
        default="grpc",
        help="how the embedded control plane's configuration reaches the client",
    )


async def _demo(args: argparse.Namespace) -> int:
    from .._demo import run

    return await run(
        updates=args.updates, bootstrap=args.bootstrap, listener=args.listener, source=args.source
    )


def _serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=_port, default=18000, help="port (18000; 0: any free one)")


def _port(text: str) -> int:
    """An argparse type: a TCP port, 0 (any free one) to 65535."""
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0-65535)")
    return int(text)


async def _serve(args: argparse.Namespace) -> int:
    from .._demo import EDS_CLUSTERS, LISTENER
    from ..testing import ControlPlane, changing_endpoints, demo_resources

    async with ControlPlane(host=args.host, port=args.port) as control_plane:
        control_plane.set_all(demo_resources(LISTENER))
        print(
            f"serving the demo configuration (listener {LISTENER}) on {control_plane.address}"
            " until Ctrl-C",
            flush=True,
        )
        await changing_endpoints(control_plane, EDS_CLUSTERS, random.Random(7))
    return OK  # not reached: changing_endpoints runs until cancelled


DEMO = Command("demo", "watch the embedded demo (until Ctrl-C or --updates N)", _demo_arguments,
               _demo)  # fmt: skip
SERVE = Command("serve", "run the demo control plane for other clients (until Ctrl-C)",
                _serve_arguments, _serve)  # fmt: skip
