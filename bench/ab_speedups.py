"""The 20% rule's measurement for each trick in `turnkeeper._speedups`: the figure it serves,
in CPU time, with the trick (`speedup`) and with the plain path put in its place (`plain`).

    for i in 1 2 3 4 5 6; do for side in plain speedup; do
        .venv/bin/python bench/ab_speedups.py $side; done; done

- `environment_snapshot` serves `turnkeeper.open()` + close (the `open` row of the README's
  SQLite table); its plain path is `frozenset(os.environ.items())`.
- The cold build (a sliding_window build of 8,000 tokens from a fresh store, on a session of
  3,000 messages: the context-build table) is printed too: it measured the empty-object read
  of stored JSON columns, which bought less than 20% and is gone.

`without_python_ranks` is measured in resident memory (bench/memory_stages.py). CPU time, best
of five, because the machine is shared: run the sides in turns and read the ratios.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import turnkeeper
from turnkeeper import _speedups
from turnkeeper.types import NewMessage

TEXT = "The quick brown fox jumps over the lazy dog while we plan the trip to Lisbon. "


def cpu_per_call(call: Callable[[], Any], calls: int) -> float:
    """Microseconds of CPU per call, the best of five runs of `calls`."""
    for _ in range(max(1, calls // 10)):
        call()
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        for _ in range(calls):
            call()
        best = min(best, (time.process_time() - start) / calls)
    return best * 1e6


def main() -> None:
    side = sys.argv[1]
    if side == "plain":
        _speedups.environment_snapshot = lambda: frozenset(os.environ.items())
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        with turnkeeper.open(url, sqlite_synchronous="OFF") as tk:
            session = tk.create_session(key="bench", ttl=None)
            tk.append_many(
                session.id,
                [NewMessage("user" if i % 2 else "assistant", f"{TEXT} {i}") for i in range(3000)],
            )

        def cold_build() -> None:
            with turnkeeper.open(url) as tk:
                tk.context(session.id, strategy="sliding_window", budget_tokens=8000)

        opened = cpu_per_call(lambda: turnkeeper.open(url).close(), 1000)
        built = cpu_per_call(cold_build, 100)
    print(f"{side:8} open {opened:7.1f} µs   cold build {built:8.1f} µs", flush=True)


if __name__ == "__main__":
    main()
