"""The OpenAI Agents SDK adapter side by side with the SDK's own `SQLiteSession`.

    .venv/bin/python bench/bench_adapters.py [--quick]

Both on a SQLite file in the same temporary directory, with their default settings, through
the `Session` protocol an agent run uses:

- add: the conversation written turn by turn (`add_items` with a user message and an assistant
  output message, as `Runner.run` does after each turn), 1,000 and 10,000 items, in total;
- add at once: the same items in one `add_items` call;
- get all: `get_items()` of the whole conversation (the SDK's default when no limit is set);
- get latest 20: `get_items(20)`.
- agent loop (1,000 items only: each turn reads the whole history): per turn, as `Runner.run`
  does, `get_items()`, then `add_items` of the user's input, then of the model's output; in
  total.

Median of several reads each; each operation runs on both sessions in alternation. The one
large add and each full read start after a full garbage collection (see `timed`). Results are printed as a Markdown table and written to
bench/results/adapters.md. The machine is shared and noisy: read the ratios, measured side by
side in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import statistics
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import structlog
from agents.memory import SQLiteSession

import turnkeeper
from turnkeeper.adapters import TurnkeeperSession

RESULTS = Path(__file__).parent / "results" / "adapters.md"
TEXT = "The quick brown fox jumps over the lazy dog while we plan the trip to Lisbon. "


def turn(n: int) -> list[dict[str, Any]]:
    """One agent turn as the SDK stores it: the user's input and the model's output message."""
    return [
        {"role": "user", "content": f"{TEXT}question {n}"},
        {
            "id": f"msg_{n:08d}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": f"{TEXT}answer {n}", "annotations": []}],
        },
    ]


Timings = dict[str, list[float]]


async def timed(call: Awaitable[Any], *, collected: bool = False) -> float:
    """Seconds until `call` (a coroutine not started yet) is done. `collected`: first a full
    garbage collection, so a large operation pays for the collections its own allocations
    cause and not for what the operations before it left pending (which side that debt fell
    on was chance, and it was most of the spread between runs)."""
    if collected:
        gc.collect()
    start = time.perf_counter()
    await call
    return time.perf_counter() - start


async def side_by_side(
    sessions: dict[str, Any],
    batches: dict[str, Any],
    loops: dict[str, Any],
    items: int,
    reads: int,
) -> dict[str, Timings]:
    """Each operation on both sessions in alternation, so the noise of a shared machine falls
    on both alike: seconds per operation, per implementation."""
    turns = [turn(n) for n in range(items // 2)]
    everything = [item for pair in turns for item in pair]
    times: dict[str, Timings] = {name: {} for name in sessions}

    def note(name: str, operation: str, seconds: float) -> None:
        times[name].setdefault(operation, []).append(seconds)

    for pair in turns:
        for name, session in sessions.items():
            note(name, "add, turn by turn", await timed(session.add_items(pair)))
    for name, batch in batches.items():
        note(name, "add at once", await timed(batch.add_items(everything), collected=True))
    for _ in range(reads):
        for name, session in sessions.items():
            note(name, "get all", await timed(session.get_items(), collected=True))
    for _ in range(reads * 20):
        for name, session in sessions.items():
            note(name, "get latest 20", await timed(session.get_items(20)))
    if items <= LOOP_ITEMS:
        for pair in turns:
            for name, loop in loops.items():
                note(name, "agent loop", await timed(_loop_turn(loop, pair)))
    for session in [*sessions.values(), *(loops.values() if items <= LOOP_ITEMS else ())]:
        got = await session.get_items()
        assert got == everything, "a session did not give back what it was given"
    return times


LOOP_ITEMS = 1_000
"""The largest size the agent loop runs at (its reads grow with every turn)."""


async def _loop_turn(session: Any, pair: list[dict[str, Any]]) -> None:
    """One turn of an agent run: the history read, then the input added, then the output."""
    await session.get_items()
    for item in pair:
        await session.add_items([item])


def summary(timings: Timings) -> dict[str, float]:
    """Total seconds for the adds and the agent loop, the median of the reads."""
    return {
        operation: sum(seconds)
        if operation.startswith(("add", "agent"))
        else statistics.median(seconds)
        for operation, seconds in timings.items()
    }


Row = tuple[str, int, str, float, float]


async def run(sizes: list[int], reads: int) -> list[Row]:
    """Each size twice: turnkeeper at its defaults (WAL, synchronous=NORMAL), then at the
    SDK's durability (WAL, synchronous=FULL: every add waits for the disk on both sides)."""
    rows = []
    for synchronous in ("NORMAL", "FULL"):
        for items in sizes:
            rows += await run_one(items, reads, synchronous)
    return rows


async def run_one(items: int, reads: int, synchronous: str) -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        sdk_path = Path(tmp) / "sdk.db"
        with turnkeeper.open(f"sqlite:///{tmp}/tk.db", sqlite_synchronous=synchronous) as tk:
            tk.counter.count_text("load the tokenizer once, as any long-lived process does")
            times = await side_by_side(
                {"sdk": SQLiteSession("bench", sdk_path), "tk": TurnkeeperSession("bench", tk)},
                {"sdk": SQLiteSession("batch", sdk_path), "tk": TurnkeeperSession("batch", tk)},
                {"sdk": SQLiteSession("loop", sdk_path), "tk": TurnkeeperSession("loop", tk)},
                items,
                reads,
            )
    sdk, ours = summary(times["sdk"]), summary(times["tk"])
    rows += [(synchronous, items, operation, sdk[operation], ours[operation]) for operation in sdk]
    return rows


def table(rows: list[Row]) -> str:
    lines = [
        "| turnkeeper at | items | operation | SDK `SQLiteSession` (FULL) | `TurnkeeperSession`"
        " | turnkeeper / SDK (time) |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for synchronous, items, operation, sdk, ours in rows:
        lines.append(
            f"| {synchronous} | {items:,} | {operation} | {_ms(sdk)} | {_ms(ours)}"
            f" | {ours / sdk:.2f}× |"
        )
    return "\n".join(lines)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 items only, fewer reads")
    options = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    sizes, reads = ([1_000], 3) if options.quick else ([1_000, 10_000], 7)
    report = table(asyncio.run(run(sizes, reads)))
    print(report)
    if not options.quick:
        RESULTS.write_text(report + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
