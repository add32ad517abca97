"""The async face on PostgreSQL: thread offload vs native drivers, side by side in one run.

    .venv/bin/python bench/bench_async.py [--seconds 4] [--tasks 1,50] [--rounds 2] [--redis]

One `PostgresStore` (pool of `postgres_pool_size`, 8 by default) and one `Turnkeeper` serve two
`AsyncTurnkeeper` faces on one event loop:

- threads: `Workers(pool size)`, each operation offloaded to a thread (the face before native
  drivers; what `open_async` still does for SQLite);
- native: `Bridge()`, each operation run on the loop through the greenlet bridge, awaiting
  psycopg's `AsyncConnectionPool` (what `open_async` does for PostgreSQL now).

For each count in `--tasks`, that many tasks each own a session and loop: append a user message, then build its context
(sliding_window, 2,000 tokens): one turn. The faces take turns (`--rounds` rounds of
`--seconds` each), on a fresh schema dropped afterwards. Reported per face: turns/s, p50/p99 of
a turn, and the process's CPU time per turn. With `--redis` the store is cached in Redis (and an
LRU), as `open()` does with `redis_url`. Results go to bench/results/async.md and between the
README's `bench:async` markers. The machine is shared and noisy: read the ratio, measured in
one run; a loaded machine gives other absolute numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from bench_http import publish  # the README block writer the other benchmarks share
from bench_shared import REDIS, TEXT, bench_schema, percentile
from turnkeeper.cache import CachedStore, SessionLRU
from turnkeeper.cache.redis_cache import RedisCache
from turnkeeper.config import load_settings
from turnkeeper.service import Turnkeeper
from turnkeeper.service.aio import AsyncTurnkeeper, Bridge, Runner, Workers
from turnkeeper.storage.base import Store
from turnkeeper.storage.postgres import PostgresStore


@dataclass
class Tally:
    """One face's turns over all its rounds."""

    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    cpu: float = 0.0

    def row(self, name: str, baseline: Tally | None) -> str:
        rate = len(self.latencies) / self.seconds
        ratio = "1.00" if baseline is None else f"{rate / baseline.rate:.2f}"
        return (
            f"| {name} | {rate:,.0f} | {ratio} | {percentile(self.latencies, 0.5) * 1000:.1f}"
            f" | {percentile(self.latencies, 0.99) * 1000:.1f}"
            f" | {self.cpu / len(self.latencies) * 1e6:,.0f} |"
        )

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds


async def round_of(
    face: AsyncTurnkeeper, sessions: list[str], seconds: float, tally: Tally
) -> None:
    """Every task loops append → context on its session until the deadline."""
    deadline = time.perf_counter() + seconds

    async def task(session_id: str) -> None:
        n = 0
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            await face.append(session_id, "user", f"{TEXT}{n}")
            await face.context(session_id, strategy="sliding_window", max_tokens=2000)
            tally.latencies.append(time.perf_counter() - start)
            n += 1

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(task(s) for s in sessions))
    tally.cpu += time.process_time() - cpu
    tally.seconds += time.perf_counter() - wall


async def compare(store: Store, tasks: int, seconds: float, rounds: int) -> dict[str, Tally]:
    settings = load_settings(database_url="postgresql://bench")  # sizes only; `store` is given
    sync = Turnkeeper(store, settings)
    runners: dict[str, Runner] = {
        "threads": Workers(settings.postgres_pool_size),
        "native": Bridge.for_settings(settings),
    }
    faces = {name: AsyncTurnkeeper(sync, runner) for name, runner in runners.items()}
    sessions = {name: [sync.create_session().id for _ in range(tasks)] for name in faces}
    tallies = {name: Tally() for name in faces}
    for name, face in faces.items():  # warm-up: pools, caches, tokenizer
        await round_of(face, sessions[name], min(1.0, seconds), Tally())
    for _ in range(rounds):
        for name, face in faces.items():
            await round_of(face, sessions[name], seconds, tallies[name])
    await faces["native"].close()  # closes the store (and the loop's async pool) once
    runners["threads"].shutdown()
    return tallies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="per face and round")
    parser.add_argument(
        "--tasks", default="1,50", help="concurrent tasks (one session each), comma-separated"
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--redis", action="store_true", help="cache the store in Redis too")
    args = parser.parse_args()
    counts = [int(n) for n in args.tasks.split(",")]
    rows = []
    for count in counts:
        with bench_schema() as url:
            store: Store = PostgresStore(url, max_size=8)
            if args.redis:
                store = CachedStore(store, lru=SessionLRU(1000), redis=RedisCache(REDIS))
            tallies = asyncio.run(compare(store, count, args.seconds, args.rounds))
        rows.append(tallies["threads"].row(f"{count} | threads (Workers)", None))
        rows.append(tallies["native"].row(f"{count} | native (Bridge)", tallies["threads"]))
    backend = "PostgreSQL + Redis" if args.redis else "PostgreSQL"
    report = (
        f"Async face on {backend}: tasks on one event loop, each looping append → context"
        f" (sliding_window, 2,000 tokens); {args.rounds} × {args.seconds:g} s per face,"
        f" alternating; pool of 8 connections; {datetime.now(UTC):%Y-%m-%d}, Python"
        f" {platform.python_version()}, a shared 2-core machine.\n\n"
        "| tasks | face | turns/s | vs threads | p50 ms | p99 ms | CPU µs/turn |\n"
        "|---:|---|---:|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n"
    )
    publish("async-redis" if args.redis else "async", report)


if __name__ == "__main__":
    main()
