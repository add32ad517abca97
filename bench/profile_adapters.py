"""Where `TurnkeeperSession`'s time goes, next to the SDK's `SQLiteSession`: the statements each
runs per operation, and the top of a CPU profile of the adapter's work.

    .venv/bin/python bench/profile_adapters.py

The cases of `bench_adapters.py` at equal durability (both SQLite files at synchronous=FULL):
turn by turn (1,000 items), one `add_items` of 10,000 items, `get_items()` of those 10,000.
Statements are counted with sqlite3's trace callback on every connection either side opens
(BEGIN and COMMIT included; `executemany` counts one a row, as SQLite runs it). The profile,
a second pass over fresh databases with no tracing, is `cProfile` timed by the thread's CPU
clock, so time the thread spends waiting (for the disk, or for a core on a loaded machine) is
not charged to whatever function happened to be running; it covers the work each `Session`
call hands to a worker thread (the hop itself costs both sides alike).

Last, "the rows alone": what each side's one large add costs in SQLite with no Python of either
side's around it: the 10,000 rows each side stored, read back, inserted again with raw sqlite3
`executemany` into a fresh file of its own schema (same pragmas: WAL, synchronous=FULL), in
one transaction; and turnkeeper's exact token counts of those messages alone. Written to
bench/results/adapters-profile.md.
"""

from __future__ import annotations

import asyncio
import collections
import cProfile
import io
import pstats
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agents.memory import SQLiteSession

import turnkeeper
from bench_adapters import turn
from turnkeeper.adapters import TurnkeeperSession

RESULTS = Path(__file__).parent / "results" / "adapters-profile.md"
TOP = 14


COUNTS: collections.Counter[str] = collections.Counter()
"""Statements run since the last `statements` call, by their first words."""


def _note(statement: str) -> None:
    words = statement[:80].split()
    if words and words[0].upper() != "PRAGMA":
        COUNTS[" ".join(words[:3]).upper()[:40]] += 1


@contextmanager
def traced_connections() -> Iterator[None]:
    """Every sqlite3 connection opened meanwhile reports its statements to `COUNTS` (as
    sqlite3 runs them: `executemany` is one statement a row)."""
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real_connect(*args, **kwargs)
        conn.set_trace_callback(_note)
        return conn

    sqlite3.connect = connect  # type: ignore[assignment]
    try:
        yield
    finally:
        sqlite3.connect = real_connect


def statements(work: Callable[[], Any], operations: int) -> tuple[str, float]:
    COUNTS.clear()
    work()
    per = {name: n / operations for name, n in COUNTS.items()}
    text = ", ".join(f"{name} ×{n:g}" for name, n in sorted(per.items(), key=lambda kv: -kv[1]))
    return text, sum(per.values())


def profiled(work: Callable[[], Any]) -> str:
    profile = cProfile.Profile(time.thread_time)
    profile.enable()
    work()
    profile.disable()
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out).sort_stats("tottime")
    stats.print_stats(TOP)
    lines = out.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls"))
    total = next(line for line in lines if "function calls" in line).strip()
    shortened = [_short(line) for line in lines[start : start + TOP + 1]]
    return "\n".join([total, "", *shortened])


def _short(line: str) -> str:
    """The line with its file path cut to the part that names the module."""
    head, _, where = line.rpartition(" ")
    for marker in ("/site-packages/", "/src/turnkeeper/", "/lib/python3.11/"):
        if marker in where:
            return f"{head} {where.split(marker, 1)[1]}"
    return line


Case = tuple[str, int, Callable[[], Any], Callable[[], Any]]
"""A title, how many operations it makes, our side's work, the SDK's."""


@contextmanager
def cases(tmp: str) -> Iterator[list[Case]]:
    """The cases over fresh databases in `tmp`, in the order they must run (the reads read
    what the adds wrote)."""
    turns = [turn(n) for n in range(500)]
    everything = [item for n in range(5_000) for item in turn(n)]
    with turnkeeper.open(f"sqlite:///{tmp}/tk.db", sqlite_synchronous="FULL") as tk:
        tk.counter.count_text("load the tokenizer once, as any long-lived process does")
        ours = {name: TurnkeeperSession(name, tk) for name in ("turns", "batch")}
        sdk = {name: SQLiteSession(name, Path(tmp) / "sdk.db") for name in ("turns", "batch")}
        ours["turns"]._add_items(turns[0])
        asyncio.run(sdk["turns"].add_items(turns[0]))

        def sdk_turns() -> None:
            for pair in turns[1:]:
                asyncio.run(sdk["turns"].add_items(pair))

        try:
            yield [
                (
                    f"add, turn by turn ({len(turns) - 1} turns of 2 items)",
                    len(turns) - 1,
                    lambda: [ours["turns"]._add_items(pair) for pair in turns[1:]],
                    sdk_turns,
                ),
                (
                    "add at once (10,000 items, one add_items)",
                    1,
                    lambda: ours["batch"]._add_items(everything),
                    lambda: asyncio.run(sdk["batch"].add_items(everything)),
                ),
                (
                    "get all (10,000 items, not cached yet)",
                    1,
                    lambda: ours["batch"]._get_items(None),
                    lambda: asyncio.run(sdk["batch"].get_items()),
                ),
            ]
        finally:
            for session in sdk.values():
                session.close()


ROW_TRIALS = 5


def rows_alone() -> str:
    """The section on the rows alone (see the module): median milliseconds of `ROW_TRIALS`."""
    with tempfile.TemporaryDirectory() as tmp:
        return _rows_alone(tmp)


def _rows_alone(tmp: str) -> str:
    everything = [item for n in range(5_000) for item in turn(n)]
    with turnkeeper.open(f"sqlite:///{tmp}/rows.db", sqlite_synchronous="FULL") as tk:
        TurnkeeperSession("source", tk)._add_items(everything)
        with sqlite3.connect(f"{tmp}/rows.db") as source:
            our_rows = source.execute("SELECT * FROM messages").fetchall()
            contents = [text for (text,) in source.execute("SELECT content FROM messages")]
        counted = _median_ms(lambda: [tk.counter.count_text(text) for text in contents])
    sdk_source = SQLiteSession("source", Path(tmp) / "sdk-rows.db")
    asyncio.run(sdk_source.add_items(everything))
    sdk_source.close()
    with sqlite3.connect(f"{tmp}/sdk-rows.db") as source:
        sdk_rows = source.execute("SELECT session_id, message_data FROM agent_messages").fetchall()

    def ours() -> float:
        path = f"{tmp}/ours-{time.monotonic_ns()}.db"
        with turnkeeper.open(f"sqlite:///{path}") as tk:
            session_id = tk.create_session().id
        rows = [(session_id, *row[1:]) for row in our_rows]
        marks = ", ".join("?" * len(rows[0]))
        return _raw_insert(path, f"INSERT INTO messages VALUES ({marks})", rows)

    def sdk() -> float:
        path = Path(tmp) / f"sdk-{time.monotonic_ns()}.db"
        SQLiteSession("target", path).close()  # its schema
        with sqlite3.connect(path) as conn:  # the session the rows belong to
            conn.execute("INSERT INTO agent_sessions (session_id) VALUES (?)", sdk_rows[0][:1])
        sql = "INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)"
        return _raw_insert(str(path), sql, sdk_rows)

    ours_ms = statistics.median(ours() for _ in range(ROW_TRIALS))
    sdk_ms = statistics.median(sdk() for _ in range(ROW_TRIALS))
    columns, average = len(our_rows[0]), sum(len(str(row)) for row in our_rows) / len(our_rows)
    sdk_average = sum(len(str(row)) for row in sdk_rows) / len(sdk_rows)
    return (
        "## The rows alone (10,000 items, one transaction, raw sqlite3)\n\n"
        "| | rows inserted | columns | about a row | ms |\n|---|---:|---:|---:|---:|\n"
        f"| turnkeeper's rows, its schema | {len(our_rows):,} | {columns} | {average:.0f} B"
        f" | {ours_ms:.1f} |\n"
        f"| the SDK's rows, its schema | {len(sdk_rows):,} | 2 | {sdk_average:.0f} B"
        f" | {sdk_ms:.1f} |\n"
        f"| turnkeeper's exact token counts of its messages, alone | | | | {counted:.1f} |\n"
    )


def _raw_insert(path: str, sql: str, rows: list[Any]) -> float:
    """Milliseconds to insert `rows` with `sql` in one transaction on a WAL file at FULL."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        start = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(sql, rows)
        conn.execute("COMMIT")
        return (time.perf_counter() - start) * 1000
    finally:
        conn.close()


def _median_ms(work: Callable[[], Any]) -> float:
    times = []
    for _ in range(ROW_TRIALS):
        start = time.perf_counter()
        work()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def run() -> str:
    counted: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp, traced_connections(), cases(tmp) as traced:
        for title, operations, mine, theirs in traced:
            our_statements, our_total = statements(mine, operations)
            sdk_statements, sdk_total = statements(theirs, operations)
            counted[title] = (
                f"Statements per operation — `TurnkeeperSession` ({our_total:g}):"
                f" {our_statements}.\n\nSDK `SQLiteSession` ({sdk_total:g}): {sdk_statements}."
            )
    sections = []
    with tempfile.TemporaryDirectory() as tmp, cases(tmp) as untraced:
        for title, _, mine, _ in untraced:
            sections.append(
                f"## {title}\n\n{counted[title]}\n\n"
                f"Top of the profile (own CPU time, seconds):\n\n```\n{profiled(mine)}\n```\n"
            )
    return (
        "# Where `TurnkeeperSession`'s time goes (SQLite, synchronous=FULL)\n\n"
        "`python bench/profile_adapters.py` (see its docstring). CPU time only: waiting for"
        " the disk (each commit's fsync, the same count on both sides) is not in these"
        " profiles. A shared, loaded machine inflates every number; compare rows, not runs."
        " Statements whose name starts with `--` run inside another: the full-text index's"
        " trigger and FTS5's own writes to its segments.\n\n"
        + "\n".join(sections)
        + "\n"
        + rows_alone()
    )


def main() -> None:
    report = run()
    print(report)
    RESULTS.write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
