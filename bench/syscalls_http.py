"""System calls per request of `turnkeeper serve` under load, this checkout against a git
revision: a count the machine's other load does not move, unlike req/s and CPU time.

    python bench/syscalls_http.py --against a20e4c8 [--clients 10] [--seconds 8]

`strace -c -f` is attached to each server (one worker, SQLite) while `bench_http.py`'s clients
loop append → context; the table gives each system call's count per request. `futex` counts
the threads' hand-offs (the GIL's among them), `pread64` the database pages read.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from bench_http import ROOT, load, serving, source_at


def per_request(summary: Path, requests: int) -> dict[str, float]:
    """`strace -c` output → calls per request, by system call."""
    counts: dict[str, float] = {}
    for line in summary.read_text().splitlines()[2:]:
        parts = line.split()
        if len(parts) >= 5 and parts[3].isdigit() and parts[-1] != "total":
            counts[parts[-1]] = int(parts[3]) / max(requests, 1)
    return counts


def traced(source: Path, tmp: str, tag: str, clients: int, seconds: float) -> dict[str, float]:
    with serving(f"sqlite:///{tmp}/{tag}.db", 1, source) as (base, token, pid):
        out = Path(tmp) / f"{tag}.strace"
        tracer = subprocess.Popen(
            ["strace", "-c", "-f", "-p", str(pid), "-o", str(out)], stderr=subprocess.DEVNULL
        )
        time.sleep(1)  # attached to every thread
        tally, _, _ = asyncio.run(load(base, token, clients, seconds))
        tracer.send_signal(signal.SIGINT)
        tracer.wait(timeout=30)
    return per_request(out, len(tally.append_ms) + len(tally.context_ms))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", required=True, help="The git revision to compare with")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        before = traced(stack.enter_context(source_at(args.against)), tmp, "before", args.clients, args.seconds)  # fmt: skip
        after = traced(ROOT / "src", tmp, "after", args.clients, args.seconds)
    names = sorted(
        set(before) | set(after), key=lambda name: -max(before.get(name, 0), after.get(name, 0))
    )
    print(f"| system call | {args.against} per request | this checkout per request |")
    print("|---|---|---|")
    for name in names:
        if max(before.get(name, 0), after.get(name, 0)) >= 0.05:
            print(f"| {name} | {before.get(name, 0):.2f} | {after.get(name, 0):.2f} |")
    print(f"| all | {sum(before.values()):.2f} | {sum(after.values()):.2f} |")


if __name__ == "__main__":
    main()
