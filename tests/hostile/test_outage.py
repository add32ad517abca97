"""A database outage: requests fail fast with 503, the probes keep answering, and the service
recovers by itself when the database returns. Against `turnkeeper serve` on a PostgreSQL of the
test's own, stopped the hard way (`pg_ctl -m immediate`) under load.

Times are measured by bench/bench_outage.py (the README quotes them); this test asserts the
behaviour, not speed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .served import Served, serve
from .throwaway_postgres import ThrowawayPostgres

REQUEST_THREADS = 40  # the server's default `server_threads`
STALLED_REQUESTS = 60  # more than it has threads


@pytest.fixture
def postgres() -> Iterator[ThrowawayPostgres]:
    with ThrowawayPostgres() as server:
        yield server


@pytest.fixture
def served(postgres: ThrowawayPostgres, tmp_path: Path) -> Iterator[Served]:
    with serve(postgres.url, tmp_path / "serve.log") as running:
        with running.client() as http:
            assert http.post("/v1/sessions", json={"key": "k"}).status_code == 201
            sent = http.post("/v1/sessions/k/messages", json={"role": "user", "content": "hi"})
            assert sent.status_code == 201
        yield running


def test_an_outage_is_503_at_once_the_probes_answer_and_the_service_recovers(
    postgres: ThrowawayPostgres, served: Served
) -> None:
    postgres.stop()
    answers: list[httpx.Response] = []

    def read() -> None:
        with served.client(timeout=60) as http:
            answers.append(http.get("/v1/sessions/k/messages"))

    readers = [threading.Thread(target=read) for _ in range(STALLED_REQUESTS)]
    for reader in readers:
        reader.start()
    # Every request thread is now waiting for a connection; the liveness probe does not queue
    # behind them, and the readiness probe says the database is unreachable, and no more.
    with httpx.Client(base_url=served.url, timeout=60) as probe:
        alive = probe.get("/healthz")
        finished_when_alive = len(answers)
        ready = probe.get("/readyz")
    for reader in readers:
        reader.join()

    assert alive.status_code == 200
    # Had it queued for a request thread, a whole pool's worth of requests would have ended
    # (timed out) before it: it did not wait for one.
    assert finished_when_alive < REQUEST_THREADS
    assert ready.status_code == 503
    assert ready.json()["detail"] == "the database is unreachable; try again shortly"
    for secret in (str(postgres.port), "127.0.0.1", "postgres@"):
        assert secret not in ready.text
    assert [answer.status_code for answer in answers] == [503] * STALLED_REQUESTS
    assert all(answer.headers["retry-after"] == "1" for answer in answers)
    assert all(answer.headers["content-type"] == "application/problem+json" for answer in answers)

    postgres.start()
    with served.client(timeout=60) as http:
        for _ in range(100):  # until the pool has reconnected (bench_outage: the first try)
            recovered = http.get("/v1/sessions/k/messages")
            if recovered.status_code != 503:
                break
        assert recovered.status_code == 200
        assert [m["content"] for m in recovered.json()["items"]] == ["hi"]
        assert http.get("/readyz").status_code == 200
        assert (
            http.post(
                "/v1/sessions/k/messages", json={"role": "user", "content": "after"}
            ).status_code
            == 201
        )
