"""What tracing costs a turn: the library with OpenTelemetry off against on, in one run.

    .venv/bin/python bench/bench_tracing.py [--rounds 6] [--turns 300] [--messages 200]

Three worker processes (OpenTelemetry's tracer provider is one per process): `off` has nothing
configured; `on` calls `turnkeeper.telemetry.configure()` with `OTEL_EXPORTER_OTLP_ENDPOINT`
pointing at a collector in the parent process (a loopback HTTP server that accepts and drops
`POST /v1/traces`), so its spans are batched, encoded and sent over OTLP/HTTP as in production;
`spans` makes the same spans into a batch processor whose exporter drops them, which separates
what making spans costs from what encoding and sending them costs (the exporter's thread
shares the process's interpreter lock). Each opens its own SQLite file holding one session of `--messages` messages, then, told by the
parent in turn (the order alternating, so both see the same neighbours' load), runs a round of
`--turns` operations of each kind:

- `turn`: append a user message, then build its context (sliding_window, 2,000 tokens): the
  store calls and the build are spans (about 8 per turn with the caches on);
- `context`: build the context of the unchanged session again: the remembered window, the
  cheapest build there is, so the span's own cost shows most.

Reported: the median time per operation of each side over the rounds, the ratios to `off`, and
what one bare SDK span costs on this machine at the time (to scale the figures by).
Results go to bench/results/tracing.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TEXT = "The quick brown fox jumps over the lazy dog while we plan the trip to Lisbon. "


# -- the worker: one side, told by the parent when to run a round ------------------------------


def worker(side: str, database: str, messages: int) -> None:
    import turnkeeper
    from turnkeeper import telemetry

    bare_span = 0.0
    if side == "on" and not telemetry.configure():
        raise SystemExit("tracing did not start: is the otel extra installed?")
    if side == "spans":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )

        class Dropped(SpanExporter):
            def export(self, spans: Any) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Dropped()))
        trace.set_tracer_provider(provider)
        tracer = trace.get_tracer("bench")
        started = time.perf_counter()
        for _ in range(1000):
            with tracer.start_as_current_span("bare", attributes={"a": "b", "c": "d"}):
                pass
        bare_span = (time.perf_counter() - started) / 1000
    tk = turnkeeper.open(database)
    session, _ = tk.get_or_create_session("bench")
    for n in range(messages):
        tk.append(session, "user" if n % 2 == 0 else "assistant", f"{TEXT}{n}")
    ready = {"ready": side, "traced": telemetry.tracer() is not None, "bare_span": bare_span}
    print(json.dumps(ready), flush=True)
    for line in sys.stdin:
        turns = int(line)
        started = time.perf_counter()
        for n in range(turns):
            tk.append(session, "user", f"{TEXT}turn {n}")
            tk.context(session, strategy="sliding_window", budget_tokens=2000)
        turn = (time.perf_counter() - started) / turns
        started = time.perf_counter()
        for _ in range(turns):
            tk.context(session, strategy="sliding_window", budget_tokens=2000)
        context = (time.perf_counter() - started) / turns
        print(json.dumps({"turn": turn, "context": context}), flush=True)
    tk.close()
    telemetry.flush()


# -- the parent ---------------------------------------------------------------------------------


def collector() -> tuple[ThreadingHTTPServer, str, list[int]]:
    """A loopback OTLP/HTTP endpoint that accepts every export and counts its bytes."""
    received: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(len(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}", received


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--worker", choices=["off", "on", "spans"], help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.db, args.messages)
        return

    server, url, received = collector()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TURNKEEPER_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    env["TURNKEEPER_CONFIG"] = os.devnull
    sides: dict[str, subprocess.Popen[str]] = {}
    times: dict[str, dict[str, list[float]]] = {}
    bare_span = 0.0
    names = ("off", "spans", "on")
    with tempfile.TemporaryDirectory() as directory:
        for side in names:
            side_env = env | ({"OTEL_EXPORTER_OTLP_ENDPOINT": url} if side == "on" else {})
            sides[side] = subprocess.Popen(
                [sys.executable, __file__, "--worker", side, "--messages", str(args.messages),
                 "--db", f"sqlite:///{Path(directory) / side}.db"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=side_env,
            )  # fmt: skip
            ready = json.loads(sides[side].stdout.readline())  # type: ignore[union-attr]
            assert ready["traced"] is (side != "off"), ready
            bare_span = max(bare_span, ready["bare_span"])
            times[side] = {"turn": [], "context": []}
        for index in range(args.rounds):
            order = names if index % 2 == 0 else names[::-1]
            for side in order:
                process = sides[side]
                process.stdin.write(f"{args.turns}\n")  # type: ignore[union-attr]
                process.stdin.flush()  # type: ignore[union-attr]
                measured = json.loads(process.stdout.readline())  # type: ignore[union-attr]
                for kind, seconds in measured.items():
                    times[side][kind].append(seconds)
        for process in sides.values():
            process.stdin.close()  # type: ignore[union-attr]
            process.wait(timeout=60)
    server.shutdown()

    rows = []
    for kind in ("turn", "context"):
        off, made, on = (statistics.median(times[side][kind]) * 1e6 for side in names)
        rows.append(
            f"| {kind} | {off:.0f} µs | {made:.0f} µs ({made / off:.2f}×) "
            f"| {on:.0f} µs ({on / off:.2f}×) |"
        )
    report = "\n".join(
        [
            "# Tracing cost: OpenTelemetry off vs on (library, SQLite, caches on)",
            "",
            f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC · {platform.python_version()} · "
            f"{os.cpu_count()} cores (shared) · `bench/bench_tracing.py --rounds {args.rounds} "
            f"--turns {args.turns} --messages {args.messages}`",
            "",
            "| operation | off | spans made, dropped | on: OTLP/HTTP, batched |",
            "|---|---|---|---|",
            *rows,
            "",
            f"Median per operation over {args.rounds} alternating rounds of {args.turns}. "
            f"The collector received {len(received)} exports, {sum(received) // 1024} KiB. "
            f"A turn makes 3 spans (`append_messages`, `lookup_session`, `search_memory`), a "
            f"remembered context 2. One bare SDK span cost {bare_span * 1e6:.0f} µs on this "
            "machine during the run.",
            "",
        ]
    )
    print(report)
    (ROOT / "bench" / "results" / "tracing.md").write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
