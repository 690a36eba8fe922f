"""Run `xdsclient check` against our control plane, clean and with each seeded protocol bug,
and print the rule table of the clean run, the mutation table (bug -> rules that caught it)
and the time taken.

Run: ``.venv/bin/python bench/conformance.py [--quiet 1.0] [--timeout 5.0]``.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from xdsclient.conformance._mutations import mutation_table, run_seeded


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quiet", type=float, default=1.0)
    parser.add_argument("--timeout", type=float, default=5.0)
    args = parser.parse_args()
    start = time.perf_counter()
    reports = await run_seeded(quiet=args.quiet, timeout=args.timeout)
    elapsed = time.perf_counter() - start
    print(reports[None].table())
    print()
    print(mutation_table(reports))
    print(f"\n{len(reports)} checks (clean + each seeded bug) in {elapsed:.1f} s, run at once")


if __name__ == "__main__":
    asyncio.run(main())
