"""Serve the whole differential corpus to grpcio's C-core xDS client and to xdsclient's
decoders, and print each disagreement and the agreement table per type.

Run: ``.venv/bin/python bench/differential.py``.
"""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.differential.corpus_more import ALL as VARIANTS
from tests.differential.harness import run, table


async def main() -> None:
    outcomes = await run(VARIANTS)
    for outcome in outcomes:
        if not outcome.agree:
            print(
                f"DISAGREE {outcome.tag} {outcome.variant.kind:<9} ours="
                f"{'ACK' if outcome.ours else 'NACK'} grpc="
                f"{'ACK' if outcome.grpc else 'NACK' if outcome.grpc is False else '-'}"
                f"  {outcome.variant.description}"
            )
    print(table(outcomes))


if __name__ == "__main__":
    asyncio.run(main())
