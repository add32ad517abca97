"""Replicas on one PostgreSQL database: 1 → 2 → 4 `turnkeeper serve` processes, and what Redis
buys when a read lands on a replica that did not do the write.

    make bench            # or: python bench/bench_replicas.py [--seconds 10] [--clients 16]

Every replica is a real `turnkeeper serve --workers 1` subprocess on its own loopback port, all
on one database (a schema of its own in `$TURNKEEPER_BENCH_POSTGRES_URL`, dropped afterwards).
The load client (`bench_http`'s raw keep-alive HTTP/1.1 driver) spreads the requests over the
replicas as a round-robin load balancer would: request k of client i goes to replica
(i + k) mod N, so a session's append and its next context build land on different replicas.
Each client owns one session, which starts with `--history` messages.

1. Replicas: each client loops append → context (sliding_window, 2,000 tokens). Reported:
   req/s, p50/p99 of all requests, and the replicas' CPU time per request (user + system of
   all of them: what other load on a shared machine disturbs least).
2. Redis: on 2 replicas, each client appends, then builds its context `--reads` times (as a
   UI refreshing, a retry, an agent re-reading): the first read is on the other replica than
   the append, the next alternate. Without Redis a replica's in-process LRU can only serve what
   that replica itself built since the last write; with Redis a replica reuses what the other
   one built. Reported, from each replica's `/metrics`: builds served by the LRU, by Redis and
   from the database; context p50/p99; and the index or table scans of the `messages` table per
   context build (`pg_stat_user_tables`; each append's idempotency lookup is one of them, the
   same in both rows).

Results go to bench/results/replicas.md and into docs/benchmarks.md between the `bench:replicas`
markers. The numbers are ratios measured in one run: a loaded machine gives different ones.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psycopg

import turnkeeper
from bench_http import Connection, cpu_seconds, pct, serving
from bench_shared import REDIS, bench_schema
from turnkeeper.types import NewMessage

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "replicas.md"
BENCHMARKS_PAGE = ROOT / "docs" / "benchmarks.md"  # the docs page holding the tables
TEXT = "Where should we eat near Alfama tonight? We are vegetarian and like quiet places. "
PROJECT = "bench"
CONTEXT = "context?strategy=sliding_window&budget_tokens=2000"


@dataclass
class Tally:
    """What the clients saw."""

    append_ms: list[float] = field(default_factory=list)
    context_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return len(self.append_ms) + len(self.context_ms)


@contextmanager
def replicas(url: str, count: int, redis: bool) -> Iterator[tuple[list[str], str, list[int]]]:
    """`count` replicas on `url` (with Redis in front when `redis`); yields their base URLs,
    an API key and their process ids."""
    saved = os.environ.get("TURNKEEPER_REDIS_URL")
    if redis:
        os.environ["TURNKEEPER_REDIS_URL"] = REDIS
    try:
        with ExitStack() as stack:
            started = [stack.enter_context(serving(url, 1)) for _ in range(count)]
            yield [base for base, _, _ in started], started[0][1], [pid for _, _, pid in started]
    finally:
        os.environ.pop("TURNKEEPER_REDIS_URL", None)
        if saved is not None:
            os.environ["TURNKEEPER_REDIS_URL"] = saved


def prepare(url: str, clients: int, history: int) -> None:
    """Each client's session, with `history` messages already in it."""
    with turnkeeper.open(url, lru_size=0) as tk:
        for index in range(clients):
            session = tk.create_session(key=f"client-{index}", project=PROJECT, ttl=None)
            batch = [NewMessage("user", f"{TEXT}{n}") for n in range(history)]
            if batch:
                tk.append_many(session.id, batch)


async def client(
    connections: list[Connection], index: int, reads: int, deadline: float, tally: Tally
) -> None:
    """Append, then build the context `reads` times; request k goes to replica (index + k)."""
    key, sent = f"client-{index}", 0
    while time.perf_counter() < deadline:
        for step in range(1 + reads):
            connection = connections[(index + sent) % len(connections)]
            sent += 1
            started = time.perf_counter()
            if step == 0:
                body = {"role": "user", "content": f"{TEXT}#{sent}", "id": f"{key}-{sent}"}
                status, answer = await connection.request(
                    "POST", f"/v1/sessions/{key}/messages", body
                )
                timings, expected = tally.append_ms, 201
            else:
                status, answer = await connection.request("GET", f"/v1/sessions/{key}/{CONTEXT}")
                timings, expected = tally.context_ms, 200
            if status == expected:
                timings.append((time.perf_counter() - started) * 1000)
            else:
                tally.errors.append(f"{status} {answer[:200]!r}")


def _connection(base: str, token: str) -> Connection:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    return Connection(host, int(port), token)


async def load(bases: list[str], token: str, clients: int, reads: int, seconds: float) -> Tally:
    tally = Tally()
    per_client = [[_connection(base, token) for base in bases] for _ in range(clients)]
    deadline = time.perf_counter() + seconds
    try:
        await asyncio.gather(
            *(client(c, n, reads, deadline, tally) for n, c in enumerate(per_client))
        )
    finally:
        for connections in per_client:
            for connection in connections:
                connection.close()
    for error in tally.errors[:5]:
        print(f"error: {error}", file=sys.stderr)
    return tally


def cache_counts(bases: list[str]) -> tuple[float, float, float]:
    """(LRU hits, Redis hits, misses) summed over the replicas' `/metrics`."""
    lru = shared = missed = 0.0
    for base in bases:
        for line in httpx.get(f"{base}/metrics").text.splitlines():
            if line.startswith('turnkeeper_cache_hits_total{layer="lru"}'):
                lru += float(line.split()[-1])
            elif line.startswith('turnkeeper_cache_hits_total{layer="redis"}'):
                shared += float(line.split()[-1])
            elif line.startswith("turnkeeper_cache_misses_total "):
                missed += float(line.split()[-1])
    return lru, shared, missed


def message_scans(url: str) -> int:
    """Index and sequential scans of the schema's `messages` table so far (statistics reach
    the view at most a second late, so the caller waits before asking)."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT coalesce(idx_scan, 0) + seq_scan FROM pg_stat_user_tables"
            " WHERE relname = 'messages' AND schemaname = current_schema()"
        ).fetchone()
    return int(row[0]) if row else 0


@dataclass
class Run:
    replicas: int
    redis: bool
    tally: Tally
    elapsed: float
    cpu: float
    cache: tuple[float, float, float] = (0.0, 0.0, 0.0)
    scans: int = 0


def measure(
    count: int, *, redis: bool, clients: int, reads: int, history: int, seconds: float
) -> Run:
    with bench_schema() as url:
        turnkeeper.open(url).close()
        prepare(url, clients, history)
        with replicas(url, count, redis) as (bases, token, pids):
            cache_before, cpu_before = cache_counts(bases), sum(map(cpu_seconds, pids))
            time.sleep(1.5)
            scans_before = message_scans(url)
            started = time.perf_counter()
            tally = asyncio.run(load(bases, token, clients, reads, seconds))
            elapsed = time.perf_counter() - started
            cpu = sum(map(cpu_seconds, pids)) - cpu_before
            after = cache_counts(bases)
        time.sleep(1.5)  # the replicas' backends have exited: their statistics are flushed
        scans = message_scans(url) - scans_before
    cache = (after[0] - cache_before[0], after[1] - cache_before[1], after[2] - cache_before[2])
    return Run(count, redis, tally, elapsed, cpu, cache, scans)


def replica_row(run: Run, first: Run) -> str:
    every = run.tally.append_ms + run.tally.context_ms
    rate, base = run.tally.requests / run.elapsed, first.tally.requests / first.elapsed
    return (
        f"| {run.replicas} | {rate:,.0f} | {rate / base:.2f}× | {statistics.median(every):.1f}"
        f" / {pct(every, 0.99):.1f} | {run.cpu * 1000 / max(1, run.tally.requests):.2f}"
        f" | {len(run.tally.errors)} |"
    )


def redis_row(run: Run) -> str:
    lru, shared, missed = run.cache
    builds = max(1.0, lru + shared + missed)
    context = run.tally.context_ms
    return (
        f"| {'with Redis' if run.redis else 'without Redis'} | {lru / builds:.0%}"
        f" | {shared / builds:.0%} | {missed / builds:.0%}"
        f" | {statistics.median(context):.1f} / {pct(context, 0.99):.1f}"
        f" | {run.scans / max(1, len(context)):.2f} | {len(run.tally.errors)} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="per configuration")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--replicas", default="1,2,4", help="replica counts to measure")
    parser.add_argument("--reads", type=int, default=3, help="context builds per append (Redis)")
    parser.add_argument(
        "--history", type=int, default=500, help="messages each session starts with"
    )
    args = parser.parse_args()
    load_before = os.getloadavg()
    options = {"clients": args.clients, "history": args.history, "seconds": args.seconds}

    counts = [int(n) for n in args.replicas.split(",")]
    scaling = [measure(n, redis=False, reads=1, **options) for n in counts]
    for run in scaling:
        print(replica_row(run, scaling[0]), file=sys.stderr)
    cross = [measure(2, redis=redis, reads=args.reads, **options) for redis in (False, True)]
    for run in cross:
        print(redis_row(run), file=sys.stderr)
    load_after = os.getloadavg()

    command = "python bench/bench_replicas.py " + " ".join(sys.argv[1:])
    report = "\n".join(
        [
            f"Replicas on one PostgreSQL database, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
            f" (`{command.strip()}`): {args.clients} clients, each owning a session of"
            f" {args.history:,} messages at the start, {args.seconds:.0f} s per row, requests"
            f" spread round-robin over the replicas. Machine: a shared {os.cpu_count()}-core"
            f" box, load average {load_before[0]:.1f} before → {load_after[0]:.1f} after.",
            "",
            "#### Replicas (`turnkeeper serve --workers 1` each; append → context)",
            "",
            "| replicas | req/s | ÷ 1 replica | p50 / p99 ms | replicas' CPU ms/req | errors |",
            "|---:|---:|---:|---:|---:|---:|",
            *(replica_row(run, scaling[0]) for run in scaling),
            "",
            f"#### What Redis buys: 2 replicas, append → {args.reads} context builds, the first"
            " on the other replica",
            "",
            "| | builds served by the LRU | by Redis | from the database | context p50 / p99 ms"
            " | `messages` scans per build | errors |",
            "|---|---:|---:|---:|---:|---:|---:|",
            *(redis_row(run) for run in cross),
        ]
    )
    print(report)
    RESULTS.write_text(report + "\n", encoding="utf-8")
    start, end = "<!-- bench:replicas -->", "<!-- /bench:replicas -->"
    text = BENCHMARKS_PAGE.read_text(encoding="utf-8")
    if start in text and end in text:
        head, rest = text.split(start, 1)
        BENCHMARKS_PAGE.write_text(
            f"{head}{start}\n{report}\n{end}{rest.split(end, 1)[1]}", "utf-8"
        )


if __name__ == "__main__":
    main()
