"""What each layer of the HTTP service costs per request: the app driven in-process, one request
at a time, under cProfile; results in bench/results/http-layers.md and docs/benchmarks.md's
`bench:http-layers` block.

    python bench/layers_http.py [--requests 400]
    python bench/layers_http.py --against main [--rounds 5]   # before/after, side by side

The same requests as `bench_http.py` (append a message with an id → build a sliding_window
context of 2,000 tokens, API keys on, request logs rendered as JSON into /dev/null) go straight
into the ASGI app, without a socket or an HTTP server (those are the same for the baseline),
and with the thread pool run inline so that one profiler sees every layer. The time per request
is measured without the profiler; the profiler then gives each layer's share of it (the
cumulative time of the functions that are that layer; a profiler slows Python more than C, so
these are shares of a profiled run, scaled to the unprofiled time).

With `--against REV`, turnkeeper as of that git revision and this checkout are measured in
turns (each round a fresh process of each, alternating, so both see the same load) and the
medians go to bench/results/http-layers-vs-REV.md.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import logging
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio.to_thread

import turnkeeper
from turnkeeper.apikeys import ApiKeys
from turnkeeper.config import load_settings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_http import ROOT, TEXT, publish, source_at

# (layer, functions whose cumulative time is that layer: (file suffix, function name))
LAYERS: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "auth: API key verification (one indexed read + SHA-256)",
        [("server/auth.py", "authenticate"), ("server/auth.py", "authenticate_remembered")],
    ),
    ("token counting (exact, o200k_base)", [("turnkeeper/tokens.py", "count_message")]),
    (
        "store: SQL, commit (fsync) and row decoding",
        [
            *(
                ("turnkeeper/storage/sql/store.py", name)
                for name in (
                    "append_messages",
                    "read_messages",
                    "read_messages_versioned",
                    "lookup_session",
                    "get_session",
                    "find_session_by_key",
                    "find_messages",
                    "find_api_key",
                )
            ),
            # The same, where they were before the store became the storage/sql package (so
            # that `--against` an older revision puts its store in this layer too):
            ("turnkeeper/storage/sql_store.py", "append_messages"),
            ("turnkeeper/storage/sql.py", "read_messages"),
            ("turnkeeper/storage/sql.py", "read_messages_versioned"),
            ("turnkeeper/storage/sql.py", "lookup_session"),
            ("turnkeeper/storage/sql.py", "get_session"),
            ("turnkeeper/storage/sql.py", "find_session_by_key"),
            ("turnkeeper/storage/sql.py", "find_messages"),
            ("turnkeeper/storage/sql.py", "find_api_key"),
        ],
    ),
    (
        "context build (strategy, rendering, OpenAI shape)",
        [
            ("turnkeeper/context/builder.py", "build"),
            ("server/routes/context.py", "_shaped"),
        ],
    ),
    (
        "request log line and metrics",
        [
            ("turnkeeper/logs.py", "info"),
            ("prometheus_client/metrics.py", "inc"),
            ("prometheus_client/metrics.py", "observe"),
        ],
    ),
    ("response validation and serialization", [("fastapi/routing.py", "serialize_response")]),
]

MINUS = {
    # the context build reads the store: counted there, not twice
    "context build (strategy, rendering, OpenAI shape)": "store: SQL, commit (fsync) and row decoding",
}


async def _inline(func: Any, *args: Any, **_: Any) -> Any:
    return func(*args)


class Driver:
    """Calls the ASGI app directly, as uvicorn would, with a complete request body."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.auth = [(b"authorization", f"Bearer {token}".encode())]

    async def call(self, method: str, path: str, query: bytes = b"", body: Any = None) -> int:
        payload = b"" if body is None else json.dumps(body).encode()
        headers = [*self.auth, (b"host", b"bench"), (b"content-type", b"application/json"),
                   (b"content-length", str(len(payload)).encode())]  # fmt: skip
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
            "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": query,
            "headers": headers, "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1),
            "root_path": "",
        }  # fmt: skip
        sent = False
        statuses: list[int] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": payload, "more_body": False}
            await asyncio.Event().wait()  # no disconnect while the answer is written
            return {}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        await self.app(scope, receive, send)
        return statuses[0]

    async def turns(self, first: int, count: int) -> None:
        for n in range(first, first + count):
            body = {"role": "user", "content": f"{TEXT}#{n}", "id": f"bench-{n}"}
            status = await self.call("POST", "/v1/sessions/bench/messages", body=body)
            assert status == 201, status
            query = b"strategy=sliding_window&budget_tokens=2000"
            status = await self.call("GET", "/v1/sessions/bench/context", query)
            assert status == 200, status


async def measure(requests: int) -> tuple[float, dict[str, float]]:
    """(ms per request unprofiled, {layer: share of the profiled time})."""
    from turnkeeper.server.app import create_app
    from turnkeeper.server.observability import configure_logging

    anyio.to_thread.run_sync = _inline  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/layers.db"
        with turnkeeper.open(url) as tk:
            _, token = ApiKeys(tk.store).create("bench")
        app = create_app(load_settings(database_url=url))
        devnull = open(os.devnull, "w")  # noqa: SIM115
        stderr, sys.stderr = sys.stderr, devnull
        restore = configure_logging(logging.INFO, "json")
        sys.stderr = stderr
        startup: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        started: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        await startup.put({"type": "lifespan.startup"})
        lifespan = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"},
                                            "state": {}}, startup.get, started.put))  # fmt: skip
        await started.get()
        driver = Driver(app, token)
        assert await driver.call("POST", "/v1/sessions", body={"key": "bench"}) == 201
        await driver.turns(0, 100)  # the tokenizer loaded, the session some 100 messages deep
        pairs = requests // 2
        began = time.perf_counter()
        await driver.turns(100, pairs)
        per_request = (time.perf_counter() - began) * 1000 / (2 * pairs)
        profile = cProfile.Profile()
        profile.enable()
        await driver.turns(100 + pairs, pairs)
        profile.disable()
        await startup.put({"type": "lifespan.shutdown"})
        await started.get()
        await lifespan
        restore()
        devnull.close()
    return per_request, _shares(pstats.Stats(profile))


def _shares(stats: pstats.Stats) -> dict[str, float]:
    table: dict[tuple[str, int, str], Any] = stats.stats  # type: ignore[attr-defined]
    total = max(ct for (_, _, _, ct, _) in table.values())
    cumulative: dict[str, float] = {}
    for layer, functions in LAYERS:
        cumulative[layer] = sum(
            ct
            for (path, _, name), (_, _, _, ct, _) in table.items()
            if any(path.endswith(suffix) and name == wanted for suffix, wanted in functions)
        )
    for layer, inner in MINUS.items():
        cumulative[layer] = max(0.0, cumulative[layer] - _inside(table, layer, inner))
    return {layer: seconds / total for layer, seconds in cumulative.items()}


def _inside(table: dict[tuple[str, int, str], Any], layer: str, inner: str) -> float:
    """Time of `inner`'s functions spent under `layer`'s (from the callers table)."""
    outer = dict(LAYERS)[layer]
    wanted = dict(LAYERS)[inner]
    spent = 0.0
    for (path, _, name), (_, _, _, _, callers) in table.items():
        if not any(path.endswith(s) and name == w for s, w in wanted):
            continue
        for (caller_path, _, caller_name), (_, _, _, ct) in callers.items():
            if any(caller_path.endswith(s) and caller_name == w for s, w in outer):
                spent += ct
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--against", default="", help="Also measure this git revision.")
    parser.add_argument("--rounds", type=int, default=5, help="Alternating runs (--against).")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one run's data
    args = parser.parse_args()
    if args.against:
        compare(args.against, args.requests, args.rounds)
        return
    per_request, shares = asyncio.run(measure(args.requests))
    if args.json:
        print(json.dumps({"per_request": per_request, "shares": shares}))
        return
    rest = 1 - sum(shares.values())
    rows = [
        f"| {layer} | {share:.0%} | {share * per_request:.2f} |" for layer, share in shares.items()
    ]
    rows.append(
        f"| FastAPI and Starlette: routing, dependencies, parameter and body validation, middlewares (request id, auth gate, body limit) | {rest:.0%} | {rest * per_request:.2f} |"
    )
    report = "\n".join(
        [
            f"Per request, in-process (`python bench/layers_http.py --requests {args.requests}`):"
            f" **{per_request:.2f} ms** on average over append → context pairs (a session about"
            f" 100 messages deep, API keys on, one request at a time, load average"
            f" {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; no socket or HTTP server,"
            " which cost the same for the baseline).",
            "",
            "| layer | share | ms per request |",
            "|---|---:|---:|",
            *rows,
            "",
        ]
    )
    publish("http-layers", report)


def compare(revision: str, requests: int, rounds: int) -> None:
    """Medians of `rounds` alternating runs of `revision` and this checkout, published."""
    runs: dict[str, list[dict[str, Any]]] = {revision: [], "this checkout": []}
    with source_at(revision) as before:
        for _ in range(rounds):
            for label, source in ((revision, before), ("this checkout", ROOT / "src")):
                command = [sys.executable, __file__, "--requests", str(requests), "--json"]
                env = {**os.environ, "PYTHONPATH": str(source)}
                done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
                runs[label].append(json.loads(done.stdout.strip().splitlines()[-1]))

    def median_ms(label: str, layer: str | None) -> float:
        return statistics.median(
            run["per_request"] * (1 if layer is None else run["shares"][layer])
            for run in runs[label]
        )

    def row(name: str, layer: str | None) -> str:
        cells = []
        for label in runs:
            ms = median_ms(label, layer)
            share = "" if layer is None else f" ({ms / median_ms(label, None):.0%})"
            cells.append(f"{ms:.2f}{share}")
        return f"| {name} | {' | '.join(cells)} |"

    report = "\n".join(
        [
            f"Per request, in-process (`python bench/layers_http.py --against {revision}"
            f" --requests {requests} --rounds {rounds}`): medians of {rounds} alternating runs"
            f" of each, ms (share of the request); load average {os.getloadavg()[0]:.1f} on"
            f" {os.cpu_count()} cores.",
            "",
            f"| | {revision} | this checkout |",
            "|---|---:|---:|",
            row("whole request (append → context pairs)", None),
            *(row(layer, layer) for layer, _ in LAYERS),
            "",
            "Every run, ms per request: "
            + "; ".join(
                f"{label} " + ", ".join(f"{run['per_request']:.2f}" for run in runs[label])
                for label in runs
            ),
            "",
        ]
    )
    publish(f"http-layers-vs-{revision}", report)


if __name__ == "__main__":
    main()
