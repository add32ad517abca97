"""CPU time of `TurnkeeperSession` next to the SDK's `SQLiteSession`, for this checkout and,
optionally, another one side by side.

    .venv/bin/python bench/ab_adapters_cpu.py [--against /path/to/other/checkout] [--rounds 6]

Each round runs one child process per checkout (alternating, so the noise of a shared machine
falls on both alike). A child measures, on fresh SQLite files at the defaults of both sides,
the process CPU time (`time.process_time`: every thread, and none of the waiting for the disk
or for a core) of: one `add_items` of 1,000 and of 10,000 items, the same items turn by turn
(two items an `add_items`), `get_items()` of all of them, and (1,000 items only) an agent loop
— each turn, as `Runner.run` does, `get_items()`, then `add_items` of the input, then of the
output — for turnkeeper and for the SDK;
each after a full garbage collection, so an operation pays for the collections its own
allocations cause, not for what the one before it left pending.
Printed: the median over the rounds of turnkeeper's CPU divided by the SDK's, per checkout.
Wall-clock times, with the disk, are `bench_adapters.py`'s.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

SIZES = (1_000, 10_000)
LOOP_ITEMS = 1_000
"""The largest size the agent loop runs at (its reads grow with every turn)."""
HERE = Path(__file__).resolve().parent


def _child() -> None:
    """Measure once in this process (its `sys.path` picks the checkout) and print JSON."""
    sys.path.insert(0, str(HERE))
    from agents.memory import SQLiteSession

    import turnkeeper
    from bench_adapters import turn
    from turnkeeper.adapters import TurnkeeperSession

    def cpu(work: Callable[[], Awaitable[Any]]) -> float:
        gc.collect()  # no collection left pending by the operation before
        start = time.process_time()
        asyncio.run(work())
        return time.process_time() - start

    ratios: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, turnkeeper.open(f"sqlite:///{tmp}/tk.db") as tk:
        tk.counter.count_text("load the tokenizer once, as any long-lived process does")
        for size in SIZES:
            pairs = [turn(n) for n in range(size // 2)]
            everything = [item for pair in pairs for item in pair]
            sides = {
                "tk": lambda name: TurnkeeperSession(name, tk),
                "sdk": lambda name: SQLiteSession(name, Path(tmp) / "sdk.db"),
            }
            spent: dict[str, dict[str, float]] = {"tk": {}, "sdk": {}}
            for side, make in sides.items():
                batch, turns = make(f"batch{size}"), make(f"turns{size}")

                async def by_turns(session: Any = turns, pairs: Any = pairs) -> None:
                    for pair in pairs:
                        await session.add_items(pair)

                spent[side]["add at once"] = cpu(
                    lambda s=batch, items=everything: s.add_items(items)
                )
                spent[side]["add, turn by turn"] = cpu(by_turns)
                spent[side]["get all"] = cpu(lambda s=batch: s.get_items())
                if size <= LOOP_ITEMS:
                    loop = make(f"loop{size}")

                    async def agent_loop(session: Any = loop, pairs: Any = pairs) -> None:
                        for pair in pairs:
                            await session.get_items()
                            for item in pair:  # the input, then the output
                                await session.add_items([item])

                    spent[side]["agent loop (get, add, add)"] = cpu(agent_loop)
            for operation, sdk in spent["sdk"].items():
                ratios[f"{size:,} {operation}"] = spent["tk"][operation] / sdk
    print(json.dumps(ratios))


def _run(checkout: Path) -> dict[str, float]:
    return child_result([str(Path(__file__).resolve()), "--child"], checkout)


def child_result(arguments: list[str], checkout: Path) -> dict[str, float]:
    """The JSON a child Python process (`python ARGUMENTS`) prints last, run with `checkout`'s
    turnkeeper first on its path (the bench scripts' `--against` and checkout arguments)."""
    env = dict(os.environ, PYTHONPATH=str(checkout / "src"))
    out = subprocess.run(
        [sys.executable, *arguments],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result: dict[str, float] = json.loads(out.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="another checkout to compare with")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child()
        return
    checkouts = {"this": HERE.parent}
    if args.against is not None:
        checkouts["against"] = args.against.resolve()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
    for _ in range(args.rounds):
        for name, path in checkouts.items():
            runs[name].append(_run(path))
    names = list(checkouts)
    print("| operation | " + " | ".join(f"{name} (tk/SDK CPU)" for name in names) + " |")
    print("|---|" + "---:|" * len(names))
    for operation in runs[names[0]][0]:
        medians = [
            statistics.median(run[operation] for run in runs[name]) if operation in runs[name][0]
            else None  # a case the other checkout's script does not have
            for name in names
        ]  # fmt: skip
        cells = ["—" if m is None else f"{m:.2f}×" for m in medians]
        print(f"| {operation} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
