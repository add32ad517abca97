"""The library figures of `bench_sqlite.py`'s open and build tables, this checkout against
another one, side by side in one run.

    .venv/bin/python bench/bench_checkouts.py --against ../other-checkout [--rounds 40]

Each checkout runs in a worker process of its own (this interpreter, with the other checkout's
`src` first on its path) over the same SQLite file (a session of `--messages` messages, made
once by this checkout), and the parent tells the two in turn to do a round of each operation,
so both see the same disk and the same neighbours' load: read the ratios. Measured per
operation, as `bench_sqlite.py` measures it: `turnkeeper.open` + close; an open and one read;
a cold sliding_window build (8,000 tokens, a fresh store each time); a warm build of an
unchanged session; a build after one for another budget (pages cached, built again).

Results are printed as a Markdown table and written to bench/results/checkouts.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

RESULTS = Path(__file__).parent / "results" / "checkouts.md"
TEXT = "The quick brown fox jumps over the lazy dog while we plan the trip to Lisbon. "
OPERATIONS = ("open", "open and one read", "cold build", "warm build", "build again")


def worker(url: str, session_id: str) -> None:
    """For each `round N` line on stdin, do each operation N times and answer with the times
    (seconds, by operation) as one JSON line."""
    import turnkeeper

    def build(tk: Any, budget: int = 8000) -> None:
        tk.context(session_id, strategy="sliding_window", budget_tokens=budget)

    warm = turnkeeper.open(url)
    build(warm)
    print(json.dumps(turnkeeper.__file__), flush=True)
    for line in sys.stdin:
        times: dict[str, list[float]] = {name: [] for name in OPERATIONS}
        for _ in range(int(line.split()[1])):
            start = time.perf_counter()
            turnkeeper.open(url).close()
            times["open"].append(time.perf_counter() - start)
            start = time.perf_counter()
            with turnkeeper.open(url) as reader:
                reader.get_session(session_id)
            times["open and one read"].append(time.perf_counter() - start)
            with turnkeeper.open(url) as cold:
                start = time.perf_counter()
                build(cold)
                times["cold build"].append(time.perf_counter() - start)
            start = time.perf_counter()
            build(warm)
            times["warm build"].append(time.perf_counter() - start)
            build(warm, 8001)
            start = time.perf_counter()
            build(warm)
            times["build again"].append(time.perf_counter() - start)
        print(json.dumps(times), flush=True)
    warm.close()


class Worker:
    def __init__(self, checkout: Path, url: str, session_id: str) -> None:
        env = {"PYTHONPATH": str(checkout / "src"), "PATH": "/usr/bin:/bin"}
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker", url, session_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.times: dict[str, list[float]] = {name: [] for name in OPERATIONS}
        module = json.loads(self._read())
        if not module.startswith(str(checkout.resolve())):
            raise SystemExit(f"the worker for {checkout} imported {module}")

    def _read(self) -> str:
        stdout: TextIO | None = self.process.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            raise SystemExit(f"a worker failed (exit {self.process.wait()})")
        return line

    def round(self, count: int) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(f"round {count}\n")
        stdin.flush()
        for name, values in json.loads(self._read()).items():
            self.times[name] += values

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait()


def populate(path: Path, size: int) -> str:
    import turnkeeper
    from turnkeeper.types import NewMessage

    with turnkeeper.open(f"sqlite:///{path}", sqlite_synchronous="OFF") as tk:
        session = tk.create_session(key="bench", ttl=None)
        tk.append(session.id, "system", "You are a meticulous travel agent.")
        batch = [
            NewMessage("user" if i % 2 else "assistant", f"{TEXT} turn {i}") for i in range(1, size)
        ]
        for start in range(0, len(batch), 2000):
            tk.append_many(session.id, batch[start : start + 2000])
        return session.id


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], sys.argv[3])
        return
    ours = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--against", type=Path, default=ours, help="the other checkout")
    parser.add_argument("--messages", type=int, default=10_000, help="messages in the session")
    parser.add_argument("--rounds", type=int, default=40, help="rounds of each side")
    parser.add_argument("--round", type=int, default=5, help="operations a turn of each side")
    args = parser.parse_args()
    theirs: Path = args.against.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        session_id = populate(path, args.messages)
        url = f"sqlite:///{path}"
        workers = [Worker(ours, url, session_id), Worker(theirs, url, session_id)]
        try:
            for n in range(args.rounds):
                for w in workers if n % 2 == 0 else workers[::-1]:
                    w.round(args.round)
        finally:
            for w in workers:
                w.close()
    mine, other = workers[0].times, workers[1].times
    lines = [
        f"Library figures, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC (`python"
        f" bench/bench_checkouts.py --against {theirs}`): this checkout ({ours}) and that one"
        f" in alternating rounds of {args.round}, {args.rounds} rounds each, on a session of"
        f" {args.messages:,} messages (SQLite). Medians in ms.",
        "",
        "| operation | theirs ms | ours ms | ours / theirs (time) |",
        "|---|---:|---:|---:|",
    ]
    for name in OPERATIONS:
        a, b = statistics.median(other[name]) * 1e3, statistics.median(mine[name]) * 1e3
        lines.append(f"| {name} | {a:.3f} | {b:.3f} | **{b / a:.2f}** |")
    report = "\n".join(lines) + "\n"
    print(report)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
