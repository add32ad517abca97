"""Database outage: how fast requests fail, whether the probes stay quick, how fast it recovers.

    python bench/bench_outage.py

Starts a PostgreSQL of its own (initdb + pg_ctl in a temporary directory, on a free port; the
shared server is never touched) and `turnkeeper serve` on it, with the default settings. Then
kills the database (`pg_ctl -m immediate`) and measures: one request's time to its 503, the
time of `/healthz` while 60 requests wait for connections, and, after the database is started
again, the time from its start to the first 200. Results go to bench/results/outage.md and the
README between the `bench:outage` markers.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.hostile.served import serve  # noqa: E402 - the tests' own helpers, from the root
from tests.hostile.throwaway_postgres import ThrowawayPostgres  # noqa: E402

from bench_http import publish  # noqa: E402


def timed(call: object) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    response = call()  # type: ignore[operator]
    return (time.perf_counter() - started) * 1000, response


def main() -> None:
    with (
        ThrowawayPostgres() as postgres,
        tempfile.TemporaryDirectory() as tmp,
        serve(postgres.url, Path(tmp) / "serve.log") as served,
        served.client(timeout=120) as http,
    ):
        http.post("/v1/sessions", json={"key": "k"}).raise_for_status()
        postgres.stop()
        first_ms, first = timed(lambda: http.get("/v1/sessions/k/messages"))
        stalled = [
            threading.Thread(target=lambda: http.get("/v1/sessions/k/messages")) for _ in range(60)
        ]
        for thread in stalled:
            thread.start()
        time.sleep(0.2)
        alive_ms, alive = timed(lambda: httpx.get(served.url + "/healthz"))
        ready_ms, ready = timed(lambda: httpx.get(served.url + "/readyz", timeout=60))
        for thread in stalled:
            thread.join()
        postgres.start()
        started = time.perf_counter()
        attempts = 1
        while http.get("/v1/sessions/k/messages").status_code != 200:
            attempts += 1
        recovered_ms = (time.perf_counter() - started) * 1000
    report = "\n".join(
        [
            f"Database outage, {datetime.now(UTC):%Y-%m-%d}: `turnkeeper serve` (defaults:"
            " acquire and connect timeouts 2 s) on a PostgreSQL killed with"
            " `pg_ctl -m immediate`, then started again.",
            "",
            "| what | result |",
            "|---|---|",
            f"| a request while the database is down | {first.status_code} in {first_ms:.0f} ms |",
            f"| `/healthz` while 60 requests wait for connections | {alive.status_code} in"
            f" {alive_ms:.0f} ms |",
            f"| `/readyz` then | {ready.status_code} in {ready_ms:.0f} ms |",
            f"| database started → first 200 | {recovered_ms:.0f} ms ({attempts} requests) |",
            "",
        ]
    )
    publish("outage", report)


if __name__ == "__main__":
    main()
