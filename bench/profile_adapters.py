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
call hands to a worker thread (the hop itself costs both sides alike). Written to
bench/results/adapters-profile.md.
"""

from __future__ import annotations

import asyncio
import collections
import cProfile
import io
import pstats
import sqlite3
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
        " trigger and FTS5's own writes to its segments.\n\n" + "\n".join(sections)
    )


def main() -> None:
    report = run()
    print(report)
    RESULTS.write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
