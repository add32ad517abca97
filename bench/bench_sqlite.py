"""Embedded SQLite benchmarks, measured in one run against raw sqlite3 as the physical baseline.

    make bench            # or: .venv/bin/python bench/bench_sqlite.py [--quick]

1. Append: 2,000 single appends to one session, turnkeeper vs raw sqlite3 doing the same durable
   work (one INSERT + COMMIT per message, WAL, the same `synchronous` setting).
2. Context build (sliding_window, 8,000-token budget) on sessions of 100 … 100,000 messages,
   each build from a fresh connection (a new store), median of several builds.
3. Peak memory (tracemalloc) of one context build on the 100,000-message session.

Results are printed as a Markdown table and written to bench/results/sqlite.md. The machine is
shared and noisy: read the ratios, which are measured side by side in one run.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
import tracemalloc
import uuid
from datetime import UTC, datetime
from pathlib import Path

import turnkeeper
from turnkeeper.tokens import counter_for
from turnkeeper.types import NewMessage

RESULTS = Path(__file__).parent / "results" / "sqlite.md"
TEXT = "The quick brown fox jumps over the lazy dog while we plan the trip to Lisbon. "


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def interleaved_appends(
    root: Path, count: int, synchronous: str, round_size: int = 50
) -> tuple[list[float], list[float]]:
    """Single appends, raw sqlite3 and turnkeeper taking turns in rounds of `round_size`, so
    both see the same disk and the same neighbours' load (a shared machine drifts).

    The raw baseline is the physical minimum for the same durable work: one INSERT + COMMIT
    per message into a table keyed like ours, WAL, the same `synchronous` setting.
    """
    conn = sqlite3.connect(root / "raw.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute(
        "CREATE TABLE messages (session_id TEXT, seq INTEGER, id TEXT UNIQUE, role TEXT,"
        " content TEXT, created_at TEXT, tokens INTEGER, PRIMARY KEY (session_id, seq))"
    )
    raw: list[float] = []
    ours: list[float] = []
    with turnkeeper.open(f"sqlite:///{root / 'tk.db'}", sqlite_synchronous=synchronous) as tk:
        session = tk.create_session(key="bench")
        for seq in range(1, count + 1):
            start = time.perf_counter()
            conn.execute("BEGIN")
            conn.execute(
                "INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)",
                ("s", seq, str(uuid.uuid4()), "user", f"{TEXT}{seq}",
                 datetime.now(UTC).isoformat(), 20),
            )  # fmt: skip
            conn.execute("COMMIT")
            raw.append(time.perf_counter() - start)
            if seq % round_size == 0:  # then the same number through turnkeeper
                for i in range(seq - round_size + 1, seq + 1):
                    start = time.perf_counter()
                    tk.append(session.id, "user", f"{TEXT}{i}")
                    ours.append(time.perf_counter() - start)
    conn.close()
    return raw, ours


def populate(path: Path, size: int) -> str:
    with turnkeeper.open(f"sqlite:///{path}", sqlite_synchronous="OFF") as tk:
        session = tk.create_session(key=f"size-{size}", ttl=None)
        tk.append(session.id, "system", "You are a meticulous travel agent.")
        batch: list[NewMessage] = []
        for i in range(1, size):
            role = "user" if i % 2 else "assistant"
            batch.append(NewMessage(role, f"{TEXT} turn {i}"))
            if len(batch) == 2000:
                tk.append_many(session.id, batch)
                batch = []
        if batch:
            tk.append_many(session.id, batch)
        return session.id


def build_once(path: Path, session_id: str) -> tuple[float, int]:
    """One sliding_window build from a fresh connection; returns (seconds, messages loaded)."""
    start = time.perf_counter()
    with turnkeeper.open(f"sqlite:///{path}") as tk:
        window = tk.context(session_id, strategy="sliding_window", max_tokens=8000)
    return time.perf_counter() - start, window.report.messages_loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--synchronous", default="FULL", choices=["FULL", "NORMAL"])
    args = parser.parse_args()
    appends = 300 if args.quick else 2000
    sizes = [100, 1000, 10_000] if args.quick else [100, 1000, 10_000, 100_000]
    builds = 5 if args.quick else 15

    counter_for("o200k_base").count_text("load the tokenizer once per process")
    lines = [
        f"Benchmarks of {datetime.now(UTC):%Y-%m-%d %H:%M} UTC (`python bench/bench_sqlite.py"
        f"{' --quick' if args.quick else ''}`), synchronous={args.synchronous}",
        "",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        raw, ours = interleaved_appends(root, appends, args.synchronous)
        raw_rate, our_rate = len(raw) / sum(raw), len(ours) / sum(ours)
        lines += [
            f"### Append ({appends} single appends to one session, interleaved with raw in rounds of 50)",
            "",
            "| | messages/s | p50 ms | p99 ms |",
            "|---|---:|---:|---:|",
            f"| raw sqlite3 (INSERT + COMMIT) | {raw_rate:,.0f} | {percentile(raw, 0.5) * 1e3:.3f}"
            f" | {percentile(raw, 0.99) * 1e3:.3f} |",
            f"| turnkeeper `append` | {our_rate:,.0f} | {percentile(ours, 0.5) * 1e3:.3f}"
            f" | {percentile(ours, 0.99) * 1e3:.3f} |",
            "",
            f"turnkeeper / raw rate: **{our_rate / raw_rate:.2f}** (target ≥ 0.5)",
            "",
            "### Context build (sliding_window, 8,000-token budget, fresh connection each build)",
            "",
            "| messages in session | median ms | p90 ms | messages loaded |",
            "|---:|---:|---:|---:|",
        ]
        medians: dict[int, float] = {}
        for size in sizes:
            path = root / f"size-{size}.db"
            session_id = populate(path, size)
            timings, loaded = [], 0
            for _ in range(builds):
                seconds, loaded = build_once(path, session_id)
                timings.append(seconds)
            medians[size] = statistics.median(timings)
            lines.append(
                f"| {size:,} | {medians[size] * 1e3:.2f} | {percentile(timings, 0.9) * 1e3:.2f}"
                f" | {loaded} |"
            )
        largest = sizes[-1]
        lines += [
            "",
            f"{largest:,}-message build / 100-message build: "
            f"**{medians[largest] / medians[100]:.2f}×** (target ≤ 2×)",
        ]
        path = root / f"size-{largest}.db"
        with turnkeeper.open(f"sqlite:///{path}") as tk:
            session = tk.get_session(f"size-{largest}")
            tracemalloc.start()
            tk.context(session.id, strategy="sliding_window", max_tokens=8000)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        lines += [
            "",
            f"Peak memory of one build on {largest:,} messages: **{peak / 1024:.0f} KiB**",
        ]
    report = "\n".join(lines) + "\n"
    print(report)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(report, encoding="utf-8")
    (RESULTS.parent / "sqlite.json").write_text(
        json.dumps({"append_ratio": our_rate / raw_rate, "build_ratio":
                    medians[largest] / medians[100], "peak_kib": peak / 1024}),
        encoding="utf-8",
    )  # fmt: skip


if __name__ == "__main__":
    main()
