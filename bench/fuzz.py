"""The fuzzers with many more examples than CI runs, with a table of what ran.

    python bench/fuzz.py [--examples 20000]

Runs the core fuzzers (arbitrary SotW and Delta responses through a session) and the decoder
mutation fuzzers (structural and byte mutations of valid resources) under pytest with
XDS_FUZZ_EXAMPLES set, and prints each test's outcome and time.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

TARGETS = ["tests/reliability/test_fuzz.py", "tests/resources/test_mutations.py"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=20_000)
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "XDS_FUZZ_EXAMPLES": str(args.examples)}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--durations=0",
        "-o",
        "timeout=0",
    ]
    done = subprocess.run([*command, *TARGETS], cwd=root, env=env, capture_output=True, text=True)
    print(f"{'test':<78} {'seconds':>8}")
    for seconds, name in re.findall(r"^([\d.]+)s call\s+(\S+)$", done.stdout, re.MULTILINE):
        print(f"{name.split('::')[-1][:78]:<78} {float(seconds):>8.1f}")
    print(done.stdout.strip().splitlines()[-1])
    print(f"{args.examples} examples per fuzz test")
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
