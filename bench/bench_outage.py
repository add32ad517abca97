"""Database outage: how fast requests fail, whether the probes stay quick, how fast it recovers.

    python bench/bench_outage.py

Starts a PostgreSQL of its own (initdb + pg_ctl in a temporary directory, on a free port; the
shared server is never touched) and `turnkeeper serve` on it, with the default settings. Then:

1. Freezes the database (SIGSTOP to every process: connections stay open, nothing answers) and
   measures one request's time to its answer (on an idle pooled connection, so bounded by the
   socket timeout), the slowest of 60 requests at once, and, after SIGCONT, the time to the
   first 200.
2. Kills the database (`pg_ctl -m immediate`) and measures one request's time to its 503, the
   time of `/healthz` while 60 requests wait for connections, and, after the database is
   started again, the time from its start to the first 200.

Results go to bench/results/outage.md and docs/benchmarks.md between the `bench:outage` markers.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.hostile.served import serve  # noqa: E402 - the tests' own helpers, from the root
from tests.hostile.throwaway_postgres import ThrowawayPostgres  # noqa: E402

from bench_http import publish  # noqa: E402


def timed(call: Callable[[], httpx.Response]) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    response = call()
    return (time.perf_counter() - started) * 1000, response


def at_once(http: httpx.Client, count: int) -> list[tuple[float, httpx.Response]]:
    """`count` reads at once; each one's time and answer."""
    with ThreadPoolExecutor(count) as pool:
        return list(
            pool.map(lambda _: timed(lambda: http.get("/v1/sessions/k/messages")), range(count))
        )


def until_served(http: httpx.Client) -> tuple[float, int]:
    """Milliseconds until a read answers 200, and how many reads that took."""
    started = time.perf_counter()
    attempts = 1
    while http.get("/v1/sessions/k/messages").status_code != 200:
        attempts += 1
    return (time.perf_counter() - started) * 1000, attempts


def main() -> None:
    with (
        ThrowawayPostgres() as postgres,
        tempfile.TemporaryDirectory() as tmp,
        serve(postgres.url, Path(tmp) / "serve.log") as served,
        served.client(timeout=120) as http,
    ):
        http.post("/v1/sessions", json={"key": "k"}).raise_for_status()
        http.get("/v1/sessions/k/messages").raise_for_status()  # a pooled connection, idle

        postgres.freeze()
        try:
            frozen_ms, frozen = timed(lambda: http.get("/v1/sessions/k/messages"))
            crowd = at_once(http, 60)
        finally:
            postgres.thaw()
        thawed_ms, thawed_attempts = until_served(http)

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
        recovered_ms, attempts = until_served(http)
    crowd_statuses = ", ".join(
        f"{status} ×{sum(1 for _, r in crowd if r.status_code == status)}"
        for status in sorted({r.status_code for _, r in crowd})
    )
    report = "\n".join(
        [
            f"Database outage, {datetime.now(UTC):%Y-%m-%d}: `turnkeeper serve` (defaults:"
            " acquire and connect timeouts 2 s, statement timeout 5 s, socket timeout 6 s) on a"
            " PostgreSQL frozen (SIGSTOP to every process, then SIGCONT), then killed with"
            " `pg_ctl -m immediate` and started again.",
            "",
            "| what | result |",
            "|---|---|",
            f"| a request while the database is frozen (an idle pooled connection) |"
            f" {frozen.status_code} in {frozen_ms:.0f} ms |",
            f"| 60 requests at once while it is frozen | {crowd_statuses}; slowest in"
            f" {max(ms for ms, _ in crowd):.0f} ms |",
            f"| database thawed → first 200 | {thawed_ms:.0f} ms ({thawed_attempts} requests) |",
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
