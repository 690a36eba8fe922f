"""Serve corpus variants to grpcio's C-core xDS client and to our decoders; compare verdicts.

Why: C-core is the reference xDS client we can run here (grpcio is already a dependency). All
variants are served at once from one `ControlPlane`, each under its own names, to one grpcio
subprocess that opens a channel per variant's listener; a variant's verdict for its changed type
is NACK when C-core's error_detail names the changed resource. Our verdict is the decoder's,
as our client would decode with the same bootstrap (clusters: `cluster_type` of its
``certificate_providers``, none here).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Sequence

import attrs

from xdsclient import ResourceDecodeError
from xdsclient.resources import (
    ENDPOINT,
    LISTENER,
    ROUTE_CONFIGURATION,
    ResourceType,
    cluster_type,
)
from xdsclient.testing import ControlPlane

from .corpus import CDS, EDS, LDS, RDS, Chain, Variant, base_chain

_TYPES: dict[str, ResourceType[object]] = {
    LDS: LISTENER,  # type: ignore[dict-item]
    RDS: ROUTE_CONFIGURATION,  # type: ignore[dict-item]
    CDS: cluster_type(()),  # type: ignore[dict-item]  # the bootstrap below has no providers
    EDS: ENDPOINT,  # type: ignore[dict-item]
}

# The grpcio side: one channel per listener, each asked to connect, then a settle period.
_CLIENT = """
import sys, time, grpc
channels = [grpc.insecure_channel("xds:///" + name) for name in sys.argv[2:]]
for channel in channels:
    grpc.channel_ready_future(channel)
time.sleep(float(sys.argv[1]))
"""


@attrs.frozen
class Outcome:
    variant: Variant
    tag: str
    ours: bool  #: accepted by our decoder
    grpc: bool | None  #: accepted by C-core; None if it never answered that resource

    @property
    def agree(self) -> bool:
        return self.ours == self.grpc


def _tag(index: int) -> str:
    return f"v{index:04d}"


def build(variants: Sequence[Variant]) -> list[Chain]:
    chains = []
    for i, variant in enumerate(variants):
        chain = base_chain(_tag(i))
        variant.change(chain)
        chains.append(chain)
    return chains


def our_verdict(variant: Variant, chain: Chain) -> bool:
    message = {LDS: chain.listener, RDS: chain.routes, CDS: chain.cluster, EDS: chain.endpoints}
    try:
        _TYPES[variant.kind].decode(message[variant.kind].SerializeToString())
    except ResourceDecodeError:
        return False
    return True


async def grpc_verdicts(chains: Sequence[Chain], *, settle: float = 4.0) -> dict[str, set[str]]:
    """Per type URL: names C-core NACKed, plus a ``"seen:"`` entry per type it answered."""
    async with ControlPlane() as plane:
        for chain in chains:
            plane.set_all(chain.resources())
        bootstrap = {
            "xds_servers": [
                {
                    "server_uri": plane.address,
                    "channel_creds": [{"type": "insecure"}],
                    "server_features": ["xds_v3"],
                }
            ],
            "node": {"id": "differential"},
        }
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
            json.dump(bootstrap, file)
        env = {**os.environ, "GRPC_XDS_BOOTSTRAP": file.name}
        names = [chain.listener.name for chain in chains]
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _CLIENT,
            str(settle),
            *names,
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await process.wait()
        os.unlink(file.name)
        return _nacked_and_seen(plane)


def _nacked_and_seen(plane: ControlPlane) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for request in plane.requests:
        message = request.message
        entry = out.setdefault(request.type_url, set())
        entry.update(f"seen:{name}" for name in message.resource_names)
        if message.HasField("error_detail"):
            entry.add(message.error_detail.message)
    return out


def _grpc_accepts(found: dict[str, set[str]], type_url: str, name: str) -> bool | None:
    entries = found.get(type_url, set())
    if f"seen:{name}" not in entries and type_url in (LISTENER.type_url,):
        return None
    return not any(
        f"{name}:" in entry or f"{name}]" in entry
        for entry in entries
        if not entry.startswith("seen:")
    )


async def run(variants: Sequence[Variant], *, settle: float = 4.0) -> list[Outcome]:
    chains = build(variants)
    found = await grpc_verdicts(chains, settle=settle)
    outcomes = []
    for i, (variant, chain) in enumerate(zip(variants, chains, strict=True)):
        name = {
            LDS: chain.listener.name,
            RDS: chain.routes.name,
            CDS: chain.cluster.name,
            EDS: chain.endpoints.cluster_name,
        }[variant.kind]
        grpc_ok = _grpc_accepts(found, _TYPES[variant.kind].type_url, name)
        outcomes.append(Outcome(variant, _tag(i), our_verdict(variant, chain), grpc_ok))
    return outcomes


def table(outcomes: Sequence[Outcome]) -> str:
    lines = [f"{'type':<10}{'agree':>7}{'disagree':>10}{'total':>7}"]
    for kind in (LDS, RDS, CDS, EDS):
        mine = [o for o in outcomes if o.variant.kind == kind]
        agree = sum(o.agree for o in mine)
        lines.append(f"{kind:<10}{agree:>7}{len(mine) - agree:>10}{len(mine):>7}")
    return "\n".join(lines)
