"""Shared-backend benchmarks: PostgreSQL appends under concurrency, context builds with and
without Redis, and the cache hit ratio of a repeated-read workload.

    make bench            # or: python bench/bench_shared.py [--quick]

1. Append throughput on PostgreSQL with 1, 4 and 16 writers, all to one session (they queue on
   its row lock) and each to its own: writers as threads over one process per core (each
   process an instance with a pooled connection per thread, as `turnkeeper serve --workers N`
   runs) and, beside them, one process per writer; with the writers' CPU time per message and
   the wait events of the bench's backends (`pg_stat_activity`) during the 16-writer runs.
   `--appends-only` runs this part alone (bench/results/shared-appends.md).
2. Context build (sliding_window, 8,000-token budget) on sessions of 1,000 and 100,000
   messages: straight from PostgreSQL, and with Redis in front (warm, no in-process LRU).
3. Hit ratio of the LRU + Redis caches over a workload that rereads a few hot sessions and
   sometimes appends to them (each append makes the next read of that session a miss).

Everything runs in a schema of its own in `$TURNKEEPER_BENCH_POSTGRES_URL` (default: the test
database on 127.0.0.1), dropped afterwards. Results go to bench/results/shared.md and into
docs/benchmarks.md between the `bench:shared` markers.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import os
import random
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
from prometheus_client import REGISTRY

import turnkeeper
from turnkeeper.types import NewMessage

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "shared.md"
BENCHMARKS_PAGE = ROOT / "docs" / "benchmarks.md"  # the docs page holding the tables
POSTGRES = os.environ.get(
    "TURNKEEPER_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS = os.environ.get("TURNKEEPER_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
TEXT = "The quick brown fox jumps over the lazy dog while we plan the trip to Lisbon. "


APPLICATION = "turnkeeper-bench"
"""The `application_name` of the bench's connections, so `pg_stat_activity` tells them apart
from other clients of the same server."""


@contextmanager
def bench_schema() -> Iterator[str]:
    schema = f"tk_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield (
            f"{POSTGRES}?options={quote(f'-csearch_path={schema}')}&application_name={APPLICATION}"
        )
    finally:
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- 1. appends -------------------------------------------------------------------------------


def _writer(url: str, session_ids: list[str], count: int, barrier: Any, out: Any) -> None:
    """One process: a thread per session, sharing one instance and a pool with a connection
    per thread (as a `turnkeeper serve` worker serves concurrent requests)."""
    with turnkeeper.open(url, lru_size=0, postgres_pool_size=len(session_ids)) as tk:
        tk.counter.count_text("warm up the tokenizer")
        for session_id in session_ids:
            tk.append(session_id, "user", "warm up the connections")
        spans: list[tuple[float, float]] = []

        def write(session_id: str) -> None:
            start = time.perf_counter()
            for i in range(count):
                tk.append(session_id, "user", f"{TEXT}{i}")
            spans.append((start, time.perf_counter()))

        threads = [threading.Thread(target=write, args=(sid,)) for sid in session_ids]
        barrier.wait()
        cpu = time.process_time()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        cpu = time.process_time() - cpu
        out.put((min(start for start, _ in spans), max(end for _, end in spans), cpu))


def append_throughput(
    url: str, writers: int, per_writer: int, *, shared: bool, processes: int
) -> tuple[float, float]:
    """Messages per second, all writers together, from the first start to the last end, and
    the writers' own CPU time per message in ms (what the client side costs, whatever the
    load); the writers are threads spread evenly over `processes` processes."""
    with turnkeeper.open(url, lru_size=0) as tk:
        if shared:
            one = tk.create_session(ttl=None).id
            targets = [one] * writers
        else:
            targets = [tk.create_session(ttl=None).id for _ in range(writers)]
    processes = min(processes, writers)
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(processes), ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(url, targets[n::processes], per_writer, barrier, out))
        for n in range(processes)
    ]
    for proc in procs:
        proc.start()
    spans = [out.get(timeout=900) for _ in procs]
    for proc in procs:
        proc.join()
    elapsed = max(end for _, end, _ in spans) - min(start for start, _, _ in spans)
    messages = writers * per_writer
    return messages / elapsed, sum(cpu for _, _, cpu in spans) * 1000 / messages


@contextmanager
def wait_events(application: str) -> Iterator[collections.Counter[str]]:
    """What the bench's own PostgreSQL backends are doing, sampled every 20 ms meanwhile:
    running, waiting for the client (`ClientRead`), for the WAL (`WALSync`, `WALWrite`), or
    for a lock (`Lock:…`: the sign of a row or counter every writer touches)."""
    seen: collections.Counter[str] = collections.Counter()
    stop = threading.Event()

    def sample() -> None:
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            while not stop.wait(0.02):
                for state, kind, event in conn.execute(
                    "SELECT state, wait_event_type, wait_event FROM pg_stat_activity"
                    " WHERE application_name = %s AND pid <> pg_backend_pid()",
                    (application,),
                ):
                    if state == "idle":
                        continue  # between transactions: the client's own time
                    seen["running" if kind is None else f"{kind}:{event}"] += 1

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        yield seen
    finally:
        stop.set()
        sampler.join()


def describe_waits(seen: collections.Counter[str]) -> str:
    total = sum(seen.values()) or 1
    return ", ".join(f"{name} {count / total:.0%}" for name, count in seen.most_common(5))


# -- 2. context builds ------------------------------------------------------------------------


def populate(url: str, size: int) -> str:
    with turnkeeper.open(url, lru_size=0) as tk:
        session = tk.create_session(key=f"size-{size}", ttl=None)
        tk.append(session.id, "system", "You are a meticulous travel agent.")
        batch: list[NewMessage] = []
        for i in range(1, size):
            batch.append(NewMessage("user" if i % 2 else "assistant", f"{TEXT} turn {i}"))
            if len(batch) == 2000:
                tk.append_many(session.id, batch)
                batch = []
        if batch:
            tk.append_many(session.id, batch)
        return session.id


def build_latencies(url: str, session_id: str, builds: int, *, redis: bool) -> list[float]:
    """Build latencies on one long-lived instance (a warmed-up replica)."""
    options: dict[str, Any] = {"lru_size": 0, "redis_url": REDIS if redis else None}
    with turnkeeper.open(url, **options) as tk:
        tk.context(session_id, strategy="sliding_window", budget_tokens=8000)  # warm (and fill)
        timings = []
        for _ in range(builds):
            start = time.perf_counter()
            tk.context(session_id, strategy="sliding_window", budget_tokens=8000)
            timings.append(time.perf_counter() - start)
    return timings


# -- 3. hit ratio -----------------------------------------------------------------------------


def counter(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def hit_ratio(url: str, requests: int) -> tuple[float, float, float, float]:
    """(windows remembered, then of the page reads that were left: LRU, Redis, database).

    A build of a session version already built is answered by the remembered window and reads
    no page; a build after an append reads the remembered tail and what was appended; what is
    still read goes to the page caches (LRU, then Redis) and else to the database."""
    rng = random.Random(7)
    with turnkeeper.open(url, redis_url=REDIS) as tk:
        sessions = [tk.create_session(ttl=None).id for _ in range(20)]
        for sid in sessions:
            tk.append_many(sid, [NewMessage("user", f"{TEXT} {i}") for i in range(200)])
        names = [
            ("turnkeeper_cache_hits_total", {"layer": layer})
            for layer in ("window", "lru", "redis")
        ]
        names.append(("turnkeeper_cache_misses_total", {}))
        before = [counter(name, **labels) for name, labels in names]
        for _ in range(requests):
            sid = sessions[min(int(rng.expovariate(0.5)), len(sessions) - 1)]  # a few hot ones
            if rng.random() < 0.1:
                tk.append(sid, "user", "a new turn")
            tk.context(sid, strategy="sliding_window", budget_tokens=8000)
        window, lru, shared, misses = (
            counter(name, **labels) - was for (name, labels), was in zip(names, before, strict=True)
        )
    reads = max(1.0, lru + shared + misses)
    return window / requests, lru / reads, shared / reads, misses / reads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--rounds", type=int, default=3, help="append rounds (median taken)")
    parser.add_argument(
        "--appends-only",
        action="store_true",
        help="only the append table, to bench/results/shared-appends.md (no docs/benchmarks.md update)",
    )
    args = parser.parse_args()
    rounds, cores = args.rounds, os.cpu_count() or 1
    per_writer_total = 400 if args.quick else 2000
    sizes = [1000, 10_000] if args.quick else [1000, 100_000]
    builds = 10 if args.quick else 30
    requests = 300 if args.quick else 2000
    command = " ".join(["python bench/bench_shared.py", *sys.argv[1:]])

    lines = [
        f"Benchmarks of {datetime.now(UTC):%Y-%m-%d %H:%M} UTC (`{command}`), PostgreSQL "
        f"{_server_version()}, Redis on 127.0.0.1, {os.cpu_count()} CPU cores",
        "",
        "### Append throughput on PostgreSQL (single-message appends)",
        "",
        f"Median of {rounds} interleaved rounds. Writers are threads spread over as many"
        f" processes as there are cores ({cores}; each process one instance with a pooled"
        " connection per thread, as `turnkeeper serve --workers N` runs), and, in the last two"
        " columns, one process per writer.",
        "",
        "| writers | to one session, msgs/s | to distinct sessions, msgs/s | ÷ 1 writer"
        " | writers' CPU ms/msg | distinct sessions, a process per writer, msgs/s"
        " | writers' CPU ms/msg |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    with bench_schema() as url:
        turnkeeper.open(url).close()  # migrate once, before the writers race
        counts = (1, 4, 16)
        results: dict[tuple[int, str], list[float]] = collections.defaultdict(list)
        waits: collections.Counter[str] = collections.Counter()
        for _ in range(rounds):
            for writers in counts:
                per_writer = max(50, per_writer_total // writers)
                for layout, shared, processes in (
                    ("one", True, cores),
                    ("many", False, cores),
                    ("procs", False, writers),
                ):
                    with wait_events(APPLICATION) as seen:
                        rate, cpu = append_throughput(
                            url, writers, per_writer, shared=shared, processes=processes
                        )
                    results[writers, layout].append(rate)
                    results[writers, f"{layout} cpu"].append(cpu)
                    if writers == counts[-1] and layout == "many":
                        waits += seen
        single = statistics.median(results[1, "many"])
        for writers in counts:
            one, many, many_cpu, procs, procs_cpu = (
                statistics.median(results[writers, layout])
                for layout in ("one", "many", "many cpu", "procs", "procs cpu")
            )
            lines.append(
                f"| {writers} | {one:,.0f} | {many:,.0f} | {many / single:.1f}×"
                f" | {many_cpu:.2f} | {procs:,.0f} | {procs_cpu:.2f} |"
            )
            print(lines[-1], flush=True)
        lines += [
            "",
            f"What the bench's PostgreSQL backends were doing inside transactions during the"
            f" {counts[-1]}-writer runs to distinct sessions (`pg_stat_activity`, sampled every"
            f" 20 ms): {describe_waits(waits)}.",
        ]
        if not args.appends_only:
            lines += [
                "",
                "### Context build (sliding_window, 8,000-token budget), warm replica",
                "",
                "| messages in session | PostgreSQL median ms | p90 ms | + Redis median ms | p90 ms |",
                "|---:|---:|---:|---:|---:|",
            ]
            for size in sizes:
                session_id = populate(url, size)
                plain = build_latencies(url, session_id, builds, redis=False)
                cached = build_latencies(url, session_id, builds, redis=True)
                lines.append(
                    f"| {size:,} | {statistics.median(plain) * 1e3:.2f}"
                    f" | {percentile(plain, 0.9) * 1e3:.2f}"
                    f" | {statistics.median(cached) * 1e3:.2f} | {percentile(cached, 0.9) * 1e3:.2f} |"
                )
                print(lines[-1], flush=True)

            window, lru, shared, database = hit_ratio(url, requests)
            lines += [
                "",
                f"### Cache hit ratio ({requests:,} context builds over 20 sessions, a few of them "
                "hot; 10% of requests append first)",
                "",
                "| builds answered by the remembered window | page reads left: by the in-process"
                " LRU | by Redis | from the database |",
                "|---:|---:|---:|---:|",
                f"| **{window:.1%}** | {lru:.1%} | {shared:.1%} | {database:.1%} |",
            ]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.appends_only:  # its own file: docs/benchmarks.md keeps the full run's tables
        RESULTS.with_name("shared-appends.md").write_text(report, encoding="utf-8")
        return
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(report, encoding="utf-8")
    _update_readme(report)


def _server_version() -> str:
    with psycopg.connect(POSTGRES) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]).split()[0] if row else "?"


def _update_readme(report: str) -> None:
    start, end = "<!-- bench:shared -->", "<!-- /bench:shared -->"
    text = BENCHMARKS_PAGE.read_text(encoding="utf-8")
    if start in text and end in text:
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        BENCHMARKS_PAGE.write_text(f"{head}{start}\n{report}{end}{tail}", encoding="utf-8")


if __name__ == "__main__":
    main()
