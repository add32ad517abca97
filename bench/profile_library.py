"""Where the library path's time goes: cProfile of open, append and a warm build, and the SQL
an append runs, statement group by statement group, against raw sqlite3.

    .venv/bin/python bench/profile_library.py

Writes bench/results/profile-library.md. Part 1 is `cProfile` (inflated absolute times; read
the shape). Part 2 runs, in interleaved rounds on one machine, the statements of a turnkeeper
append by hand on a turnkeeper database (no Python service around them) — the fast path an
append of new messages takes, then the deciding path (a retry's) with parts taken away
one at a time — the session totals update, the two SELECTs; and the full-text index trigger
that migration step 10 took out, put back — next
to raw sqlite3's one INSERT: what the SQL alone costs is the floor no Python work can go under.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import re
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import turnkeeper
from turnkeeper.storage.sql import queries as sql
from turnkeeper.storage.sql.schema import MIGRATIONS
from turnkeeper.tokens import counter_for
from turnkeeper.types import NewMessage

RESULTS = Path(__file__).parent / "results" / "profile-library.md"
TEXT = "The quick brown fox jumps over the lazy dog while we plan the trip to Lisbon. "


def profile(label: str, calls: int, run: Callable[[], object]) -> list[str]:
    """The top of a cProfile of `calls` runs, by own time."""
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    for _ in range(calls):
        run()
    profiler.disable()
    per_call = (time.perf_counter() - start) / calls * 1e3
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(14)
    body = out.getvalue().split("ncalls", 1)[-1].rstrip()
    body = re.sub(r"\S*/(site-packages|src|bench)/", "", body)  # paths short
    body = re.sub(r"\S*/lib/python3\.\d+/", "", body)
    return [
        f"### {label}: {calls:,} calls, {per_call:.3f} ms per call under the profiler",
        "",
        "```",
        "   ncalls" + body,
        "```",
        "",
    ]


def profiles(root: Path) -> list[str]:
    url = f"sqlite:///{root / 'p.db'}"
    lines: list[str] = []
    with turnkeeper.open(url) as tk:
        session = tk.create_session(key="p", ttl=None)
        tk.append(session.id, "system", "You are a meticulous travel agent.")
        n = iter(range(10**9))
        lines += profile(
            "append (synchronous=NORMAL)",
            2000,
            lambda: tk.append(session.id, "user", f"{TEXT}{next(n)}"),
        )
        tk.append_many(session.id, [NewMessage("user", f"{TEXT} {i}") for i in range(2000)])
        tk.context(session.id, strategy="sliding_window", budget_tokens=8000)
        lines += profile(
            "warm sliding_window build, 8,000 tokens (window remembered for the version)",
            2000,
            lambda: tk.context(session.id, strategy="sliding_window", budget_tokens=8000),
        )
        lines += profile(
            "open + close (another connection holds the file open, as in bench_sqlite)",
            1000,
            lambda: turnkeeper.open(url).close(),
        )
    return lines


VARIANTS = {
    "raw sqlite3: INSERT (7 columns, 1 index)": "raw",
    "turnkeeper's fast path: SELECT, INSERT … ON CONFLICT DO NOTHING, UPDATE totals"
    " (an append of new messages)": "fast",
    "the deciding path: SELECT ×2, INSERT, UPDATE totals (a retry; every append before"
    " issue 13)": "full",
    "… with the full-text index trigger of steps 7–9 (indexed in the append)": "full fts",
    "… without the totals UPDATE": "selects insert",
    "… without the two SELECTs": "insert totals",
    "INSERT alone (row + its 2 indexes)": "insert",
}
OLD_INDEX_TRIGGER = next(m for m in MIGRATIONS if m.version == 7).sqlite[1]
"""Step 7's AFTER INSERT trigger, which step 10 dropped (the index now catches up at search)."""


def sql_floor(root: Path, synchronous: str, rounds: int = 20, per_round: int = 50) -> list[str]:
    """Each variant is one `BEGIN IMMEDIATE … COMMIT` per message, interleaved in rounds."""
    state: dict[str, tuple[sqlite3.Connection, str, list[float]]] = {}
    for label, variant in VARIANTS.items():
        path = root / f"floor-{synchronous}-{len(state)}.db"
        with turnkeeper.open(f"sqlite:///{path}") as tk:
            session_id = tk.create_session(key="floor").id
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        if variant == "raw":
            conn.execute(
                "CREATE TABLE raw (session_id TEXT, seq INTEGER, id TEXT UNIQUE, role TEXT,"
                " content TEXT, created_at TEXT, tokens INTEGER, PRIMARY KEY (session_id, seq))"
            )
        if "fts" in variant:
            conn.execute(OLD_INDEX_TRIGGER)
        state[label] = (conn, session_id, [])
    for r in range(rounds):
        for label, variant in VARIANTS.items():
            conn, session_id, times = state[label]
            for i in range(per_round):
                seq = r * per_round + i + 1
                start = time.perf_counter()
                now = datetime.now(UTC).isoformat()
                conn.execute("BEGIN IMMEDIATE")
                if variant == "raw":
                    conn.execute(
                        "INSERT INTO raw VALUES (?, ?, ?, ?, ?, ?, ?)",
                        ("s", seq, str(uuid.uuid4()), "user", f"{TEXT}{seq}", now, 20),
                    )
                else:
                    if variant in ("full", "full fts", "selects insert"):
                        conn.execute(sql.SELECT_APPEND_TARGET, (session_id,)).fetchone()
                        conn.execute(
                            sql.SELECT_MESSAGES_BY_ID + "(?)", (session_id, "x")
                        ).fetchall()
                    if variant == "fast":
                        conn.execute(sql.SELECT_APPEND_TARGET, (session_id,)).fetchone()
                    conn.execute(
                        sql.INSERT_MESSAGE + (" ON CONFLICT DO NOTHING" if variant == "fast" else ""),
                        (str(uuid.uuid4()), session_id, seq, "user", None, f"{TEXT}{seq}",
                         0, now, 20, None, None, None, None, "{}"),
                    )  # fmt: skip
                    if variant in ("fast", "full", "full fts", "insert totals"):
                        conn.execute(sql.ADD_TOTALS, (seq, 1, 20, 0, 0, now, session_id))
                conn.execute("COMMIT")
                times.append(time.perf_counter() - start)
    base = None
    lines = [
        f"### The SQL of one append at synchronous={synchronous} ({rounds * per_round:,} each,"
        f" interleaved in rounds of {per_round})",
        "",
        "| statements, one transaction per message | msgs/s | p50 ms | / raw | / raw at p50 |",
        "|---|---:|---:|---:|---:|",
    ]
    base_p50 = None
    for label, (conn, _, times) in state.items():
        conn.close()
        rate, p50 = len(times) / sum(times), statistics.median(times)
        base, base_p50 = base or rate, base_p50 or p50
        # The rate is the mean's, which a checkpoint or a neighbour's burst moves; the median
        # ratio is the steadier one on a shared machine.
        lines.append(
            f"| {label} | {rate:,.0f} | {p50 * 1e3:.3f} | {rate / base:.2f} | {base_p50 / p50:.2f} |"
        )
    return [*lines, ""]


def main() -> None:
    counter_for("o200k_base").count_text("load the tokenizer once per process")
    lines = [
        "# Profile of the library path (SQLite)",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, `python bench/profile_library.py`, on the"
        " shared 2-core machine (loaded by other work: absolute times are noisy, ratios within"
        " one table are side by side).",
        "",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        lines += ["## 1. cProfile, by own time", ""]
        lines += profiles(root)
        lines += ["## 2. What the SQL alone costs (no service around it)", ""]
        for synchronous in ("NORMAL", "FULL"):
            lines += sql_floor(root, synchronous)
    report = "\n".join(lines) + "\n"
    print(report)
    RESULTS.write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
