"""Process CPU of one `add_items` of 1,000 and of 10,000 items through the OpenAI Agents
adapter, in absolute terms, for several checkouts side by side.

    .venv/bin/python bench/ab_add_cpu.py --rounds 8 NAME=/path/to/checkout ... BASE=/path

`ab_adapters_cpu.py` prints turnkeeper's CPU over the SDK's, and the SDK's own time varies
from run to run as much as the difference being measured; this prints the median CPU seconds
of turnkeeper's add alone, and each checkout's over the last one named. Each round runs one
child process per checkout (alternating); a child opens a fresh SQLite file, loads the token
counter, and times the add after a full garbage collection.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from ab_adapters_cpu import child_result

HERE = Path(__file__).resolve().parent
SIZES = ("1000", "10000")

CHILD = """
import asyncio, gc, json, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
import turnkeeper
from bench_adapters import turn
from turnkeeper.adapters import TurnkeeperSession
spent = {}
with tempfile.TemporaryDirectory() as tmp, turnkeeper.open(f"sqlite:///{tmp}/tk.db") as tk:
    tk.counter.count_text("load the tokenizer once, as any long-lived process does")
    for size in (1000, 10000):
        items = [item for n in range(size // 2) for item in turn(n)]
        session = TurnkeeperSession(f"s{size}", tk)
        gc.collect()
        start = time.process_time()
        asyncio.run(session.add_items(items))
        spent[size] = time.process_time() - start
print(json.dumps(spent))
"""


def _run(checkout: Path) -> dict[str, float]:
    return child_result(["-c", CHILD, str(HERE)], checkout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="+", help="NAME=PATH; the last is the base")
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    checkouts = {name: Path(path) for name, path in (a.split("=", 1) for a in args.checkouts)}
    spent: dict[str, dict[str, list[float]]] = {name: {s: [] for s in SIZES} for name in checkouts}
    for _ in range(args.rounds):
        for name, path in checkouts.items():
            for size, seconds in _run(path).items():
                spent[name][size].append(seconds)
    base = list(checkouts)[-1]
    print("| add_items of | " + " | ".join(checkouts) + " |")
    print("|---|" + "---:|" * len(checkouts))
    for size in SIZES:
        base_median = statistics.median(spent[base][size])
        cells = []
        for name in checkouts:
            median = statistics.median(spent[name][size])
            cells.append(f"{median * 1000:.0f} ms ({median / base_median:.2f}×)")
        print(f"| {int(size):,} items | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
