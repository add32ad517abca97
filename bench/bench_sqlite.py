"""Embedded SQLite benchmarks, measured in one run against raw sqlite3 as the physical baseline.

    make bench            # or: .venv/bin/python bench/bench_sqlite.py [--quick] [--only build]

1. Append: 2,000 single appends to one session, turnkeeper vs raw sqlite3 doing the same durable
   work (one INSERT + COMMIT per message with an exact token count, WAL), once at
   `synchronous=NORMAL` and once at `FULL`; and at the defaults of each, turnkeeper's `append`
   against the OpenAI Agents SDK's `SQLiteSession.add_items` of one item.
2. Open and warm build: `turnkeeper.open()` against raw `sqlite3.connect` + the same pragmas;
   a sliding_window build on an open store (cache warm) against raw sqlite3 reading the newest
   rows until the budget is full — of an unchanged session (the window remembered for its
   version) and built again from cached pages (after a build for another budget).
3. Context build (sliding_window, then relevant; 8,000-token budget) on sessions of 100 …
   100,000 messages,
   each build from a fresh connection (a new store). The sizes take turns in rounds (one build
   of each per round, the order rotated), so every size sees the same load of a shared
   machine; medians per size, and the median of the ratios taken within each round.
4. Peak memory (tracemalloc) of one context build on the 100,000-message session.

Results are printed as a Markdown table and written to bench/results/sqlite.md. The machine is
shared and noisy: read the ratios, which are measured side by side in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import tempfile
import time
import tracemalloc
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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
    conn = sqlite3.connect(root / f"raw-{synchronous}.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute(
        "CREATE TABLE messages (session_id TEXT, seq INTEGER, id TEXT UNIQUE, role TEXT,"
        " content TEXT, created_at TEXT, tokens INTEGER, PRIMARY KEY (session_id, seq))"
    )
    raw: list[float] = []
    ours: list[float] = []
    url = f"sqlite:///{root / f'tk-{synchronous}.db'}"
    with turnkeeper.open(url, sqlite_synchronous=synchronous) as tk:
        session = tk.create_session(key="bench")
        counter = tk.counter
        for seq in range(1, count + 1):
            start = time.perf_counter()
            content = f"{TEXT}{seq}"
            conn.execute("BEGIN")
            conn.execute(
                "INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)",
                ("s", seq, str(uuid.uuid4()), "user", content,
                 datetime.now(UTC).isoformat(), counter.count_message("user", content)),
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


def defaults_against_sdk(
    root: Path, count: int, round_size: int = 50
) -> tuple[list[float], list[float]]:
    """Single appends at each library's defaults, in alternating rounds: the OpenAI Agents
    SDK's `SQLiteSession.add_items` of one item, and turnkeeper's `append`."""
    from agents.memory import SQLiteSession

    sdk = SQLiteSession("bench", root / "sdk.db")
    theirs: list[float] = []
    ours: list[float] = []
    loop = asyncio.new_event_loop()
    with turnkeeper.open(f"sqlite:///{root / 'tk-defaults.db'}") as tk:
        session = tk.create_session(key="bench")
        for n in range(1, count + 1):
            item: Any = {"role": "user", "content": f"{TEXT}{n}"}
            start = time.perf_counter()
            loop.run_until_complete(sdk.add_items([item]))
            theirs.append(time.perf_counter() - start)
            if n % round_size == 0:
                for i in range(n - round_size + 1, n + 1):
                    start = time.perf_counter()
                    tk.append(session.id, "user", f"{TEXT}{i}")
                    ours.append(time.perf_counter() - start)
    loop.close()
    sdk.close()
    return theirs, ours


def raw_connect(path: Path) -> sqlite3.Connection:
    """What any SQLite library does to open a WAL database: connect and set the pragmas."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 60000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def raw_window(conn: sqlite3.Connection, session_id: str, budget: int) -> int:
    """The same window by hand: the newest rows, oldest first, until the budget is full."""
    kept: list[tuple[str, str]] = []
    used = 0
    rows = conn.execute(
        "SELECT role, content, tokens FROM messages WHERE session_id = ? ORDER BY seq DESC",
        (session_id,),
    )
    for role, content, tokens in rows:
        if used + tokens > budget:
            break
        used += tokens
        kept.append((role, content))
    kept.reverse()
    return len(kept)


def open_and_warm(path: Path, session_id: str, rounds: int) -> dict[str, list[float]]:
    """Alternating: open (turnkeeper vs raw connect), and a build on an open store (warm
    cache) vs the raw window on an open connection."""
    url = f"sqlite:///{path}"
    times: dict[str, list[float]] = {
        k: [] for k in ("open", "raw open", "open read", "raw open read", "warm", "raw warm",
                        "rebuild")
    }  # fmt: skip
    tk = turnkeeper.open(url)
    conn = raw_connect(path)
    tk.context(session_id, strategy="sliding_window", budget_tokens=8000)
    for _ in range(rounds):
        start = time.perf_counter()
        turnkeeper.open(url).close()
        times["open"].append(time.perf_counter() - start)
        start = time.perf_counter()
        raw_connect(path).close()
        times["raw open"].append(time.perf_counter() - start)
        # Opening puts off what it can to the first use: an open and one read, both ways.
        start = time.perf_counter()
        with turnkeeper.open(url) as reader:
            reader.get_session(session_id)
        times["open read"].append(time.perf_counter() - start)
        start = time.perf_counter()
        raw = raw_connect(path)
        raw.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        raw.close()
        times["raw open read"].append(time.perf_counter() - start)
        start = time.perf_counter()
        tk.context(session_id, strategy="sliding_window", budget_tokens=8000)
        times["warm"].append(time.perf_counter() - start)
        start = time.perf_counter()
        raw_window(conn, session_id, 8000)
        times["raw warm"].append(time.perf_counter() - start)
        # A budget the remembered window was not built for: built again, from cached pages.
        tk.context(session_id, strategy="sliding_window", budget_tokens=8001)
        start = time.perf_counter()
        tk.context(session_id, strategy="sliding_window", budget_tokens=8000)
        times["rebuild"].append(time.perf_counter() - start)
    tk.close()
    conn.close()
    return times


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


FLAT_STRATEGIES = ("sliding_window", "relevant")
"""The strategies whose build cost is measured against the session's length (`relevant` asks
the full-text index for older turns on top of reading the tail)."""


def build_once(path: Path, session_id: str, strategy: str) -> tuple[float, int]:
    """One build from a fresh connection; returns (seconds, messages loaded)."""
    start = time.perf_counter()
    with turnkeeper.open(f"sqlite:///{path}") as tk:
        window = tk.context(session_id, strategy=strategy, budget_tokens=8000)
    return time.perf_counter() - start, window.report.messages_loaded


def interleaved_builds(
    sessions: dict[int, tuple[Path, str]], rounds: int, strategy: str
) -> tuple[dict[int, list[float]], dict[int, int], list[dict[int, float]]]:
    """`rounds` rounds of one build per size, the order rotated each round (after one round
    not counted, which warms the OS cache and the tokenizer): a load that comes and goes on a
    shared machine then falls on every size alike, where a run of each size after the other
    compared one load with another. Returns the times per size, the messages each build
    loaded, and each round's times (for ratios taken within one round)."""
    sizes = list(sessions)
    for size in sizes:
        build_once(*sessions[size], strategy)
    timings: dict[int, list[float]] = {size: [] for size in sizes}
    loaded: dict[int, int] = {}
    per_round: list[dict[int, float]] = []
    for round_number in range(rounds):
        turn = round_number % len(sizes)
        this_round: dict[int, float] = {}
        for size in sizes[turn:] + sizes[:turn]:
            seconds, loaded[size] = build_once(*sessions[size], strategy)
            timings[size].append(seconds)
            this_round[size] = seconds
        per_round.append(this_round)
    return timings, loaded, per_round


def build_rows(
    sessions: dict[int, tuple[Path, str]], rounds: int, strategy: str = "sliding_window"
) -> tuple[list[str], float]:
    """The context-build table: medians per size and the ratios of the largest size to the
    smallest and to the first whose window is full (the same rows loaded: what the session's
    length alone costs). Returns the lines and the paired largest/smallest ratio."""
    timings, loaded, per_round = interleaved_builds(sessions, rounds, strategy)
    sizes = list(sessions)
    largest, smallest = sizes[-1], sizes[0]
    full = next((size for size in sizes if loaded[size] < size), largest)
    medians = {size: statistics.median(values) for size, values in timings.items()}
    lines = [
        f"### Context build ({strategy}, 8,000-token budget, fresh connection each build;"
        f" {rounds} rounds, sizes interleaved)",
        "",
        "| messages in session | median ms | p90 ms | messages loaded |",
        "|---:|---:|---:|---:|",
    ]
    for size in sizes:
        lines.append(
            f"| {size:,} | {medians[size] * 1e3:.2f} | {percentile(timings[size], 0.9) * 1e3:.2f}"
            f" | {loaded[size]} |"
        )

    def paired(numerator: int, denominator: int) -> tuple[float, float, float]:
        ratios = sorted(r[numerator] / r[denominator] for r in per_round)
        return percentile(ratios, 0.25), statistics.median(ratios), percentile(ratios, 0.75)

    low, build_ratio, high = paired(largest, smallest)
    lines += [
        "",
        f"{largest:,}-message build / {smallest:,}-message build: **{build_ratio:.2f}×**"
        f" (median of the {rounds} rounds' ratios, quartiles {low:.2f}–{high:.2f}; ratio of"
        f" the medians {medians[largest] / medians[smallest]:.2f}×; target ≤ 2×)",
    ]
    if full not in (largest, smallest):
        low, ratio, high = paired(largest, full)
        lines.append(
            f"{largest:,} / {full:,} (both windows full, {loaded[largest]} and {loaded[full]}"
            f" messages loaded: the session's length alone): **{ratio:.2f}×**"
            f" (quartiles {low:.2f}–{high:.2f})"
        )
    return lines, build_ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument(
        "--only",
        choices=["build"],
        help="run one part and print it (bench/results is left as it is): build = 3.",
    )
    parser.add_argument("--rounds", type=int, help="rounds of the interleaved context builds")
    parser.add_argument(
        "--strategy", action="append", help="with --only build: these strategies (default: both)"
    )
    args = parser.parse_args()
    appends = 300 if args.quick else 2000
    sizes = [100, 1000, 10_000] if args.quick else [100, 1000, 10_000, 100_000]
    builds = 5 if args.quick else 15
    rounds = args.rounds or (10 if args.quick else 41)
    if args.only == "build":
        counter_for("o200k_base").count_text("load the tokenizer once per process")
        with tempfile.TemporaryDirectory() as tmp:
            sessions = {size: (Path(tmp) / f"size-{size}.db", "") for size in sizes}
            for size, (path, _) in sessions.items():
                sessions[size] = (path, populate(path, size))
            for strategy in args.strategy or FLAT_STRATEGIES:
                print("\n".join(build_rows(sessions, rounds, strategy)[0]) + "\n")
        return

    counter_for("o200k_base").count_text("load the tokenizer once per process")
    lines = [
        f"Benchmarks of {datetime.now(UTC):%Y-%m-%d %H:%M} UTC (`python bench/bench_sqlite.py"
        f"{' --quick' if args.quick else ''}`)",
        "",
    ]
    ratios: dict[str, float] = {}

    def rate_rows(label: str, baseline: str, base: list[float], ours: list[float]) -> list[str]:
        base_rate, our_rate = len(base) / sum(base), len(ours) / sum(ours)
        ratios[label] = our_rate / base_rate
        return [
            f"| {label} | {baseline} | {base_rate:,.0f} | {percentile(base, 0.5) * 1e3:.3f}"
            f" | {our_rate:,.0f} | {percentile(ours, 0.5) * 1e3:.3f} | **{our_rate / base_rate:.2f}** |"
        ]

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        lines += [
            f"### Append ({appends} single appends to one session, interleaved in rounds of 50)",
            "",
            "| turnkeeper at | against | their msgs/s | their p50 ms | our msgs/s | our p50 ms"
            " | ours / theirs |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for synchronous in ("NORMAL", "FULL"):
            raw, ours = interleaved_appends(root, appends, synchronous)
            lines += rate_rows(
                f"synchronous={synchronous}", f"raw sqlite3 at {synchronous}", raw, ours
            )
        sdk, ours = defaults_against_sdk(root, appends)
        lines += rate_rows(
            "the defaults", "openai-agents `SQLiteSession` (its defaults)", sdk, ours
        )
        lines += [
            "",
            "Targets: ≥ 0.5 at NORMAL, ≥ 0.9 at FULL, ≥ 2 against `SQLiteSession` at the defaults.",
            "",
        ]
        sessions = {size: (root / f"size-{size}.db", "") for size in sizes}
        for size, (path, _) in sessions.items():
            sessions[size] = (path, populate(path, size))
        build_lines, build_ratio = build_rows(sessions, rounds)
        lines += build_lines
        for strategy in FLAT_STRATEGIES[1:]:
            lines += ["", *build_rows(sessions, rounds, strategy)[0]]
        largest = sizes[-1]
        path, session_id = sessions[largest]
        split = open_and_warm(path, session_id, builds * 10)
        median = {name: statistics.median(values) for name, values in split.items()}
        ratios["open"] = median["open"] / median["raw open"]
        ratios["open_read"] = median["open read"] / median["raw open read"]
        ratios["warm"] = median["warm"] / median["raw warm"]
        ratios["rebuild"] = median["rebuild"] / median["raw warm"]
        lines += [
            "",
            f"### Open and warm build ({largest:,}-message session, medians of {builds * 10},"
            " alternating)",
            "",
            "| | turnkeeper ms | raw sqlite3 ms | turnkeeper / raw |",
            "|---|---:|---:|---:|",
            f"| open (`turnkeeper.open` + close vs connect + pragmas + close) |"
            f" {median['open'] * 1e3:.3f} | {median['raw open'] * 1e3:.3f} | {ratios['open']:.2f}× |",
            f"| open and one read (+ `get_session` vs + one SELECT of the session row) |"
            f" {median['open read'] * 1e3:.3f} | {median['raw open read'] * 1e3:.3f}"
            f" | {ratios['open_read']:.2f}× |",
            f"| warm sliding_window build, 8,000 tokens (store open, session unchanged) |"
            f" {median['warm'] * 1e3:.3f} | {median['raw warm'] * 1e3:.3f} | {ratios['warm']:.2f}× |",
            f"| the same build after one for another budget (pages cached, window built again) |"
            f" {median['rebuild'] * 1e3:.3f} | {median['raw warm'] * 1e3:.3f}"
            f" | {ratios['rebuild']:.2f}× |",
            "",
            "Targets: open ≤ 0.5 ms; warm build ≤ 2× raw. A warm build of an unchanged session"
            " hands out the window remembered for its version; the last row builds it again.",
        ]
        with turnkeeper.open(f"sqlite:///{path}") as tk:
            session = tk.get_session(f"size-{largest}")
            tracemalloc.start()
            tk.context(session.id, strategy="sliding_window", budget_tokens=8000)
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
        json.dumps({**ratios, "build_ratio": build_ratio,
                    "peak_kib": peak / 1024}),
        encoding="utf-8",
    )  # fmt: skip


if __name__ == "__main__":
    main()
