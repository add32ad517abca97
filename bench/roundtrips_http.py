"""PostgreSQL round trips per HTTP request: the requests of `bench_http.py` (append a message
with an id → build a sliding_window context of 2,000 tokens, API keys on) driven into the ASGI
app in-process, one at a time, every pooled connection traced by libpq.

    python bench/roundtrips_http.py [--pairs 20] [--against ../other-checkout | REV]

A round trip is a `ReadyForQuery` from the server: the end of a statement (or of an empty
query, as the pool's connection check sends), of a `BEGIN` or of a `COMMIT`. On a loopback
socket each costs the server a wake-up, a parse and an answer, and the service a hand-off in
the driver, so the count is what the store's share of a request's CPU follows. With
`--against`, the same is counted for another checkout (a directory holding `src/`) or git
revision, in its own process, on a line before this checkout's. Results in
bench/results/http-roundtrips.md and docs/benchmarks.md's `bench:http-roundtrips` block.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio.to_thread

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_http import ROOT, TEXT, publish, source_at
from layers_http import Driver

TRACE_MARK = "\tReadyForQuery\t"


def _inline_thread(func: Any, *args: Any, **_: Any) -> Any:
    async def run() -> Any:
        return func(*args)

    return run()


class Tracer:
    """A libpq trace file per pooled connection, in `directory`; counts the round trips."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.files: list[Any] = []

    def attach(self, conn: Any) -> None:
        trace = open(os.path.join(self.directory, f"{len(self.files)}.trace"), "w")  # noqa: SIM115
        self.files.append(trace)
        conn.pgconn.trace(trace.fileno())

    def round_trips(self) -> int:
        total = 0
        for trace in self.files:
            with open(trace.name) as reading:
                total += sum(1 for line in reading if TRACE_MARK in line)
        return total


async def count(url: str, pairs: int) -> dict[str, float]:
    """Round trips per append and per context build, averaged over `pairs` turns."""
    import turnkeeper
    from turnkeeper.apikeys import ApiKeys
    from turnkeeper.config import load_settings
    from turnkeeper.server.app import create_app
    from turnkeeper.storage.sql.postgres import PostgresStore

    anyio.to_thread.run_sync = _inline_thread  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as tmp:
        tracer = Tracer(tmp)
        configure = PostgresStore._configure

        def traced(conn: Any) -> None:
            tracer.attach(conn)
            configure(conn)

        PostgresStore._configure = staticmethod(traced)  # type: ignore[method-assign]
        with turnkeeper.open(url) as tk:
            _, token = ApiKeys(tk.store).create("bench")
        app = create_app(load_settings(database_url=url))
        startup: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        started: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        await startup.put({"type": "lifespan.startup"})
        lifespan = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"},
                                            "state": {}}, startup.get, started.put))  # fmt: skip
        await started.get()
        driver = Driver(app, token)
        assert await driver.call("POST", "/v1/sessions", body={"key": "bench"}) == 201
        await driver.turns(0, 30)  # the tokenizer loaded, the session 30 messages deep
        spent = {"append": 0, "context": 0}
        for n in range(30, 30 + pairs):
            body = {"role": "user", "content": f"{TEXT}#{n}", "id": f"bench-{n}"}
            before = tracer.round_trips()
            assert await driver.call("POST", "/v1/sessions/bench/messages", body=body) == 201
            middle = tracer.round_trips()
            query = b"strategy=sliding_window&budget_tokens=2000"
            assert await driver.call("GET", "/v1/sessions/bench/context", query) == 200
            spent["append"] += middle - before
            spent["context"] += tracer.round_trips() - middle
        await startup.put({"type": "lifespan.shutdown"})
        await started.get()
        await lifespan
        for trace in tracer.files:
            trace.close()
    return {name: total / pairs for name, total in spent.items()}


def _child(source: Path, url: str, pairs: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(source), "TURNKEEPER_CONFIG": os.devnull}
    command = [sys.executable, __file__, "--child", url, "--pairs", str(pairs)]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    counted: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--against", default="", help="A checkout directory or a git revision.")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(count(args.child, args.pairs))))
        return
    from bench_shared import bench_schema

    rows = []
    with ExitStack() as stack:
        sources: list[tuple[str, Path]] = []
        if args.against:
            checkout = Path(args.against)
            if (checkout / "src").is_dir():
                sources.append((f"turnkeeper @{args.against}", checkout / "src"))
            else:
                sources.append(
                    (f"turnkeeper @{args.against}", stack.enter_context(source_at(args.against)))
                )
        sources.append(("turnkeeper (this checkout)", ROOT / "src"))
        for name, source in sources:
            with bench_schema() as url:
                counted = _child(source, url, args.pairs)
            rows.append(f"| {name} | {counted['append']:.1f} | {counted['context']:.1f} |")
    publish(
        "http-roundtrips",
        "\n".join(
            [
                f"PostgreSQL round trips per request (`python bench/roundtrips_http.py"
                f" {' '.join(sys.argv[1:])}`, {args.pairs} append → context pairs, a session"
                " 30+ messages deep, API keys on, caches at their defaults):",
                "",
                "| server | append | context (sliding_window, 2,000 tokens) |",
                "|---|---:|---:|",
                *rows,
                "",
            ]
        ),
    )


if __name__ == "__main__":
    main()
