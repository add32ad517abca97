"""Library append speed of this checkout against another one, side by side in one run.

    .venv/bin/python bench/bench_append.py --against ../other-checkout [--appends 1000]

Each checkout runs in a worker process of its own — this interpreter, with the other
checkout's `src` first on its path — and the parent tells the two in turn to do a round of
appends, so both see the same disk and the same neighbours' load (the machine is shared and
drifts; read the ratios). Measured: single `append`s and `append_many` of 10 to one session, on
SQLite at `synchronous=NORMAL` and `FULL` and on PostgreSQL (each worker in a schema of its own,
dropped afterwards; `TURNKEEPER_BENCH_POSTGRES_URL` or the local test server). Without
`--against` the checkout is measured against itself (a check of the noise).

Results are printed as a Markdown table and written to bench/results/append.md.
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
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

RESULTS = Path(__file__).parent / "results" / "append.md"
TEXT = "The quick brown fox jumps over the lazy dog while we plan the trip to Lisbon. "
POSTGRES_URL = os.environ.get(
    "TURNKEEPER_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
BATCH = 10
CASES = {
    "SQLite NORMAL, append": ("sqlite", "NORMAL", 1),
    "SQLite FULL, append": ("sqlite", "FULL", 1),
    f"SQLite NORMAL, append_many of {BATCH}": ("sqlite", "NORMAL", BATCH),
    "PostgreSQL, append": ("postgres", "", 1),
    f"PostgreSQL, append_many of {BATCH}": ("postgres", "", BATCH),
}


# -- the worker: one checkout, told by the parent when to run a round -------------------------


def worker(url: str, synchronous: str, batch: int) -> None:
    """Open `url`, then for each `round N` line on stdin do N appends (of `batch` messages)
    and answer with their times as one JSON line."""
    import turnkeeper
    from turnkeeper.types import NewMessage

    options: dict[str, Any] = {"sqlite_synchronous": synchronous} if synchronous else {}
    with turnkeeper.open(url, **options) as tk:
        session = tk.create_session(key=f"bench-{uuid.uuid4()}", ttl=None)
        tk.append(session.id, "system", "You are a meticulous travel agent.")
        n = 0
        print(json.dumps(turnkeeper.__file__), flush=True)
        for line in sys.stdin:
            times = []
            for _ in range(int(line.split()[1])):
                n += 1
                start = time.perf_counter()
                if batch == 1:
                    tk.append(session.id, "user", f"{TEXT}{n}")
                else:
                    tk.append_many(
                        session.id, [NewMessage("user", f"{TEXT}{n}.{i}") for i in range(batch)]
                    )
                times.append(time.perf_counter() - start)
            print(json.dumps(times), flush=True)


# -- the parent ---------------------------------------------------------------------------------


class Worker:
    def __init__(self, checkout: Path, url: str, synchronous: str, batch: int) -> None:
        env = {**os.environ, "PYTHONPATH": str(checkout / "src")}
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker", url, synchronous or "-", str(batch)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.times: list[float] = []
        self.module = json.loads(self._read())
        if not self.module.startswith(str(checkout.resolve())):
            raise SystemExit(f"the worker for {checkout} imported {self.module}")

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
        self.times += json.loads(self._read())

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait()


def postgres_schema_url(schema: str) -> str:
    sep = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{sep}options={quote(f'-csearch_path={schema}')}"


def drop_schemas(schemas: list[str]) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def compare(
    root: Path, ours: Path, theirs: Path, case: tuple[str, str, int], appends: int, round_size: int
) -> tuple[list[float], list[float]]:
    backend, synchronous, batch = case
    schemas: list[str] = []
    workers = []
    for side in ("ours", "theirs"):
        if backend == "sqlite":
            url = f"sqlite:///{root / f'{side}-{synchronous}-{batch}.db'}"
        else:
            schemas.append(f"bench_append_{uuid.uuid4().hex[:12]}")
            url = postgres_schema_url(schemas[-1])
        workers.append(Worker(ours if side == "ours" else theirs, url, synchronous, batch))
    try:
        calls = max(appends // batch, round_size)
        for done in range(0, calls, round_size):
            for w in workers if (done // round_size) % 2 == 0 else workers[::-1]:
                w.round(min(round_size, calls - done))
    finally:
        for w in workers:
            w.close()
        if schemas:
            drop_schemas(schemas)
    return workers[0].times, workers[1].times


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        url, synchronous, batch = sys.argv[2:5]
        worker(url, "" if synchronous == "-" else synchronous, int(batch))
        return
    ours = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--against", type=Path, default=ours, help="the other checkout")
    parser.add_argument("--appends", type=int, default=1000, help="messages a case appends")
    parser.add_argument("--round", type=int, default=25, help="calls a turn of each side")
    parser.add_argument("--only", default="", help="the cases whose label contains this")
    args = parser.parse_args()
    theirs: Path = args.against.resolve()
    lines = [
        f"Append speed, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC (`python bench/bench_append.py"
        f" --against {theirs}`): this checkout ({ours}) and that one in alternating rounds of"
        f" {args.round} calls, {args.appends} messages a case.",
        "",
        "| case | their calls/s | their p50 ms | our calls/s | our p50 ms | ours / theirs"
        " | at p50 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for label, case in CASES.items():
            if args.only not in label:
                continue
            mine, other = compare(Path(tmp), ours, theirs, case, args.appends, args.round)
            our_rate, their_rate = len(mine) / sum(mine), len(other) / sum(other)
            our_p50, their_p50 = statistics.median(mine), statistics.median(other)
            # The rate is the mean's, which a checkpoint or a neighbour's burst moves; the
            # median's ratio is the steadier one on a shared machine.
            lines.append(
                f"| {label} | {their_rate:,.0f} | {their_p50 * 1e3:.3f} | {our_rate:,.0f}"
                f" | {our_p50 * 1e3:.3f} | **{our_rate / their_rate:.2f}**"
                f" | {their_p50 / our_p50:.2f} |"
            )
            print(lines[-1], flush=True)
    report = "\n".join(lines) + "\n"
    print(report)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
