"""This checkout against another (e.g. a20e4c8, before the redesign) on the window figures of
`bench_sqlite.py`, in one run: the two take turns, round by round, each round a fresh process
per side, so both see the same load of a shared machine.

    git worktree add --detach /tmp/before a20e4c8
    .venv/bin/python bench/ab_windows.py --against /tmp/before/src --rounds 6

Each side works on a database of its own (its schema), made once: a session of `--messages`
messages as `bench_sqlite.py` makes them. Figures, per process the median of its repeats, in
CPU time (`time.process_time`: the load of the neighbours stays out of it):

- `open`: `turnkeeper.open` + close;
- `warm`: a sliding_window build of 8,000 tokens of an unchanged session on an open store;
- `rebuild`: the same build right after one for 8,001 tokens (cached pages, built again);
- `cold`: open a fresh store, build, close (the context-build table).

The table gives each figure's median over the rounds and the ratios of this checkout to each
other (`--against` may be given more than once).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TEXT = "The quick brown fox jumps over the lazy dog while we plan the trip to Lisbon. "
FIGURES = ("open", "warm", "rebuild", "cold")
HERE = Path(__file__).resolve().parent


def cpu_ms(call: Callable[[], Any], repeats: int) -> float:
    """Median CPU milliseconds of `call`, after a few calls to warm up."""
    for _ in range(3):
        call()
    times = []
    for _ in range(repeats):
        start = time.process_time()
        call()
        times.append(time.process_time() - start)
    return statistics.median(times) * 1000


def populate(url: str, messages: int) -> str:
    import turnkeeper
    from turnkeeper.types import NewMessage

    with turnkeeper.open(url, sqlite_synchronous="OFF") as tk:
        session = tk.create_session(key="ab-windows", ttl=None)
        tk.append(session.id, "system", "You are a meticulous travel agent.")
        batch = [
            NewMessage("user" if i % 2 else "assistant", f"{TEXT} turn {i}")
            for i in range(1, messages)
        ]
        tk.append_many(session.id, batch)
        return session.id


def worker(db: Path, messages: int) -> dict[str, float]:
    """One side's figures, in this process (its `turnkeeper` is the one on `sys.path`)."""
    import turnkeeper

    url = f"sqlite:///{db}"
    marker = db.with_suffix(".session")
    if not marker.exists():
        marker.write_text(populate(url, messages))
    session_id = marker.read_text()
    figures = {"open": cpu_ms(lambda: turnkeeper.open(url).close(), 200)}

    def cold() -> None:
        with turnkeeper.open(url) as fresh:
            fresh.context(session_id, strategy="sliding_window", budget_tokens=8000)

    figures["cold"] = cpu_ms(cold, 40)
    with turnkeeper.open(url) as tk:

        def build(budget: int) -> None:
            tk.context(session_id, strategy="sliding_window", budget_tokens=budget)

        figures["warm"] = cpu_ms(lambda: build(8000), 300)
        rebuilds = []
        for _ in range(200):
            build(8001)
            start = time.process_time()
            build(8000)
            rebuilds.append(time.process_time() - start)
        figures["rebuild"] = statistics.median(rebuilds) * 1000
    return figures


def run_side(src: Path, db: Path, messages: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    args = [sys.executable, __file__, "--worker", str(db), "--messages", str(messages)]
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout
    return {k: float(v) for k, v in json.loads(out.strip().splitlines()[-1]).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--against",
        type=Path,
        action="append",
        help="another checkout's src directory (repeatable)",
    )
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        print(json.dumps(worker(args.worker, args.messages)))
        return
    if not args.against:
        parser.error("--against is required")
    sides = {"this": HERE.parent / "src"} | {str(path): path.resolve() for path in args.against}
    results: dict[str, dict[str, list[float]]] = {s: {f: [] for f in FIGURES} for s in sides}
    with tempfile.TemporaryDirectory() as root:
        for round_ in range(args.rounds):
            order = list(sides)[round_ % len(sides) :] + list(sides)[: round_ % len(sides)]
            for side in order:
                figures = run_side(sides[side], Path(root) / f"{side}.db", args.messages)
                for name in FIGURES:
                    results[side][name].append(figures[name])
            print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)
    others = [side for side in sides if side != "this"]
    print(f"{args.rounds} rounds, {args.messages} messages, CPU ms (medians of the rounds)\n")
    print(
        "| figure | "
        + " | ".join(f"`{o}`" for o in others)
        + " | this | "
        + " | ".join(f"this / `{o}`" for o in others)
        + " |"
    )
    print("|---|" + "---:|" * (2 * len(others) + 1))
    for name in FIGURES:
        this = statistics.median(results["this"][name])
        other = [statistics.median(results[o][name]) for o in others]
        cells = [f"{v:.3f}" for v in other] + [f"{this:.3f}"] + [f"{this / v:.2f}" for v in other]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
