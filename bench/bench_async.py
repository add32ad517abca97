"""The async face on PostgreSQL: this checkout against another revision, side by side in one run.

    .venv/bin/python bench/bench_async.py [--against main] [--seconds 4] [--tasks 1,50]
                                          [--rounds 2] [--redis]

Each side is a worker process (this interpreter, with that side's `src` first on its path) that
opens `turnkeeper.open_async(url)` on a PostgreSQL schema of its own, with the default pool of
8 connections, and runs whatever that revision's async face does there: worker threads, one
per pooled connection, in this checkout; the native greenlet bridge (psycopg's
`AsyncConnectionPool` on the loop) on revisions before issue 26. The worker names the runner it
got, and the report shows it.

For each count in `--tasks`, that many tasks on the worker's event loop each own a session and
loop: append a user message, then build its context (sliding_window, 2,000 tokens): one turn.
The parent tells the two sides in turn to run a round (`--rounds` rounds of `--seconds` each,
the order alternating), so both see the same neighbours' load; the schemas are dropped
afterwards. Reported per side: turns/s, p50/p99 of a turn, and the worker's CPU time per turn.
With `--redis` each side sets `redis_url` (Redis and the in-process LRU in front of the store).
Without `--against` this checkout is measured alone. Results go to bench/results/async.md (or
async-redis.md) and between docs/benchmarks.md's `bench:async` markers. The machine is shared and
noisy: read the ratio, measured in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parent.parent
TEXT = "The quick brown fox jumps over the lazy dog while we plan the trip to Lisbon. "
REDIS = os.environ.get("TURNKEEPER_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")


# -- the worker: one side, told by the parent when to run a round ------------------------------


async def round_of(face: Any, sessions: list[str], seconds: float) -> dict[str, Any]:
    """Every task loops append → context on its session until the deadline."""
    deadline = time.perf_counter() + seconds
    latencies: list[float] = []

    async def task(session_id: str) -> None:
        n = 0
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            await face.append(session_id, "user", f"{TEXT}{n}")
            await face.context(session_id, strategy="sliding_window", budget_tokens=2000)
            latencies.append(time.perf_counter() - start)
            n += 1

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(task(s) for s in sessions))
    return {
        "latencies": latencies,
        "seconds": time.perf_counter() - wall,
        "cpu": time.process_time() - cpu,
    }


async def serve(url: str, tasks: int, redis: bool) -> None:
    """Open the face, then for each `round SECONDS` line on stdin run a round and answer with
    its tally as one JSON line."""
    import turnkeeper

    options = {"redis_url": REDIS} if redis else {}
    async with turnkeeper.open_async(url, **options) as face:
        sessions = [(await face.create_session()).id for _ in range(tasks)]
        runner = type(face._workers).__name__
        print(json.dumps({"module": turnkeeper.__file__, "runner": runner}), flush=True)
        while line := await asyncio.to_thread(sys.stdin.readline):
            print(json.dumps(await round_of(face, sessions, float(line.split()[1]))), flush=True)


# -- the parent ---------------------------------------------------------------------------------


class Side:
    """One worker process and its rounds' tallies."""

    def __init__(self, name: str, source: Path, url: str, tasks: int, redis: bool) -> None:
        env = {**os.environ, "PYTHONPATH": str(source), "TURNKEEPER_CONFIG": os.devnull}
        arguments = [__file__, "--worker", url, str(tasks), "redis" if redis else "-"]
        self.process = subprocess.Popen(
            [sys.executable, *arguments], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, env=env,
        )  # fmt: skip
        hello = json.loads(self._read())
        if not hello["module"].startswith(str(source)):
            raise SystemExit(f"the worker for {source} imported {hello['module']}")
        self.name = f"{name} ({hello['runner']})"
        self.latencies: list[float] = []
        self.seconds = 0.0
        self.cpu = 0.0

    def _read(self) -> str:
        stdout: TextIO | None = self.process.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            raise SystemExit(f"a worker failed (exit {self.process.wait()})")
        return line

    def round(self, seconds: float, *, counted: bool = True) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(f"round {seconds}\n")
        stdin.flush()
        tally = json.loads(self._read())
        if counted:
            self.latencies += tally["latencies"]
            self.seconds += tally["seconds"]
            self.cpu += tally["cpu"]

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds

    def row(self, tasks: int, baseline: Side | None) -> str:
        from bench_shared import percentile

        ratio = "1.00" if baseline is None else f"**{self.rate / baseline.rate:.2f}**"
        return (
            f"| {tasks} | {self.name} | {self.rate:,.0f} | {ratio}"
            f" | {percentile(self.latencies, 0.5) * 1000:.1f}"
            f" | {percentile(self.latencies, 0.99) * 1000:.1f}"
            f" | {self.cpu / len(self.latencies) * 1e6:,.0f} |"
        )

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def compare(sources: dict[str, Path], tasks: int, args: argparse.Namespace) -> list[Side]:
    """Each side on a schema of its own, in alternating rounds after a warm-up round."""
    from bench_shared import bench_schema

    with ExitStack() as stack:
        sides = []
        for name, source in sources.items():
            url = stack.enter_context(bench_schema())
            sides.append(Side(name, source, url, tasks, args.redis))
            stack.callback(sides[-1].close)
        for side in sides:  # warm-up: pools, caches, tokenizer
            side.round(min(1.0, args.seconds), counted=False)
        for n in range(args.rounds):
            for side in sides if n % 2 == 0 else sides[::-1]:
                side.round(args.seconds)
        return sides


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        url, tasks, redis = sys.argv[2:5]
        asyncio.run(serve(url, int(tasks), redis == "redis"))
        return
    from bench_http import publish, source_at  # the benchmarks page writer, a revision's source

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", help="a git revision to compare with (e.g. main)")
    parser.add_argument("--seconds", type=float, default=4.0, help="per side and round")
    parser.add_argument(
        "--tasks", default="1,50", help="concurrent tasks (one session each), comma-separated"
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--redis", action="store_true", help="cache the store in Redis too")
    args = parser.parse_args()
    rows = []
    with ExitStack() as stack:
        sources = {"this checkout": ROOT / "src"}
        if args.against:
            sources[f"@{args.against}"] = stack.enter_context(source_at(args.against))
        for count in (int(n) for n in args.tasks.split(",")):
            ours, *theirs = compare(sources, count, args)
            rows += [side.row(count, None) for side in theirs]
            rows.append(ours.row(count, theirs[0] if theirs else None))
            print(rows[-1], flush=True)
    backend = "PostgreSQL + Redis" if args.redis else "PostgreSQL"
    versus = f"vs @{args.against}" if args.against else "ratio"
    report = (
        f"Async face on {backend}: tasks on one event loop, each looping append → context"
        f" (sliding_window, 2,000 tokens); {args.rounds} × {args.seconds:g} s per side,"
        f" alternating; pool of 8 connections; {datetime.now(UTC):%Y-%m-%d}, Python"
        f" {platform.python_version()}, a shared 2-core machine"
        f" (`python bench/bench_async.py{f' --against {args.against}' if args.against else ''}"
        f"{' --redis' if args.redis else ''}`).\n\n"
        f"| tasks | face | turns/s | {versus} | p50 ms | p99 ms | CPU µs/turn |\n"
        "|---:|---|---:|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n"
    )
    publish("async-redis" if args.redis else "async", report)


if __name__ == "__main__":
    main()
