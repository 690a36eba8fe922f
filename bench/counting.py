"""Counts the machine's load does not change, shared by the benchmarks that compare a client of
ours with a plain one (bench/http.py, bench/channel.py): instructions under callgrind and Python
function calls under cProfile.

Why counts: on a shared, loaded machine the difference of two CPU times moves by more than
what we add, while a count of instructions or calls is the same on an idle or a busy machine.
A benchmark runs each client alone in a child process; the child opens a *window* around the
calls it counts (`window`: ``sys.call_tracing``, a C function that nothing else calls) and
`callgrind_instructions` counts what runs inside it, leaving out start-up, warm-up and close.
Multiplied by a rate measured natively for the same workload (CPU seconds per instruction of
the plain client), a count becomes microseconds.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

__all__ = [
    "OURS",
    "callgrind_instructions",
    "perf_counts",
    "python_calls",
    "syscall_counts",
    "window",
]

#: the C function of `window`, which callgrind's options name
WINDOW = "sys_call_tracing"
#: how a file of xdsclient's own modules is recognised in a profile
OURS = os.sep + "xdsclient" + os.sep
T = TypeVar("T")


def window(run: Callable[..., T], *args: Any) -> T:
    """``run(*args)`` inside the window `callgrind_instructions` counts."""
    result: T = sys.call_tracing(run, args)
    return result


def callgrind_instructions(
    argv: Sequence[str], env: Mapping[str, str] | None = None, *, all_threads: bool = True
) -> int:
    """The instructions the program ``argv`` runs inside its `window`, under callgrind.

    ``all_threads``: every thread of the process while the window is open (callgrind zeroes
    every cost as the window opens and dumps them as it closes: C-core's threads count too);
    else only the thread that opened it (collection toggled on its entry and exit). Raises
    RuntimeError with the program's last line of errors when it fails."""
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "out")
        if all_threads:
            options = [f"--zero-before={WINDOW}", f"--dump-after={WINDOW}"]
        else:
            options = ["--collect-atstart=no", f"--toggle-collect={WINDOW}"]
        command = ["valgrind", "--tool=callgrind", *options, f"--callgrind-out-file={out}"]
        done = subprocess.run(
            [*command, *argv], env=env, capture_output=True, text=True, check=False
        )
        if done.returncode == 0 and all_threads and os.path.exists(out + ".1"):
            with open(out + ".1") as dump:
                found = re.search(r"^summary:\s+(\d+)", dump.read(), re.MULTILINE)
        elif done.returncode == 0 and not all_threads:
            found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
        else:
            found = None
    if found is None:
        raise RuntimeError(f"callgrind {argv[-1]}: {done.stderr.strip().splitlines()[-1:]}")
    return int(found.group(1).replace(",", ""))


def python_calls(profilers: Sequence[cProfile.Profile], count: int) -> dict[str, float]:
    """Python function calls (C functions called from Python too) per call of ``count``
    calls under ``profilers``, in all (``calls``) and in xdsclient's own modules (``ours``)."""
    total = ours = 0
    for profiler in profilers:
        stats: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
        for (filename, _, _), (_, calls, *_rest) in stats.items():
            total += calls
            if OURS in filename:
                ours += calls
    return {"calls": total / count, "ours": ours / count}


def syscall_counts(argv: Sequence[str], env: Mapping[str, str] | None = None) -> dict[str, int]:
    """The system calls the program ``argv`` makes, every thread's, by name (``strace -c
    -f``; the whole run: subtract a shorter run's to leave start-up out). Raises
    RuntimeError with the program's last line of errors when it fails."""
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "out")
        command = ["strace", "-f", "-c", "-o", out, *argv]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"strace {argv[-1]}: {done.stderr.strip().splitlines()[-1:]}")
        with open(out) as table:
            lines = table.read().splitlines()
    counts = {}
    for line in lines:
        fields = line.split()  # % time, seconds, usecs/call, calls, [errors,] syscall
        if len(fields) in (5, 6) and fields[0][0].isdigit() and fields[-1] != "total":
            counts[fields[-1]] = int(fields[3])
    return counts


def perf_counts(
    argv: Sequence[str], events: Sequence[str], env: Mapping[str, str] | None = None
) -> dict[str, float]:
    """The software ``events`` of the program ``argv`` (``perf stat``: every thread, the
    whole run), by event name. Raises RuntimeError when it fails."""
    command = ["perf", "stat", "-x", ",", "-e", ",".join(events), *argv]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"perf stat {argv[-1]}: {done.stderr.strip().splitlines()[-1:]}")
    counts = {}
    for line in done.stderr.splitlines():
        fields = line.split(",")  # value, unit, event, ...
        if len(fields) > 3 and fields[2] in events and fields[0].replace(".", "").isdigit():
            counts[fields[2]] = float(fields[0])
    return counts
