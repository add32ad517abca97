"""A database outage: requests fail fast with 503, the probes keep answering, and the service
recovers by itself when the database returns. Against `turnkeeper serve` on a PostgreSQL of the
test's own, stopped the hard way (`pg_ctl -m immediate`) under load; frozen (every process
stopped with SIGSTOP: connections stay open and nothing answers), then thawed; and left running
while the server ends every connection (`pg_terminate_backend`, what a restart, a failover or an
idle-connection reaper does), under two replicas.

Times are measured by bench/bench_outage.py (the README quotes them); this test asserts the
behaviour, not speed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
import psycopg
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


FROZEN_REQUESTS = 12
CLIENT_PATIENCE = 60
"""Seconds a client waits for an answer: unbounded, a request on a frozen database never
answers, and this ends the test (failed) instead of hanging it."""


def test_a_frozen_database_answers_every_request_and_the_service_recovers(
    postgres: ThrowawayPostgres, served: Served
) -> None:
    with served.client(timeout=CLIENT_PATIENCE) as http:
        for _ in range(3):  # connections in the pool, idle: the ones a freeze holds
            assert http.get("/v1/sessions/k/messages").status_code == 200
    postgres.freeze()
    try:

        def request(n: int) -> httpx.Response:
            with served.client(timeout=CLIENT_PATIENCE) as http:
                if n % 3 == 0:
                    message = {"role": "user", "content": f"frozen {n}"}
                    return http.post("/v1/sessions/k/messages", json=message)
                return http.get("/v1/sessions/k/messages")

        with ThreadPoolExecutor(FROZEN_REQUESTS) as pool:
            answers = list(pool.map(request, range(FROZEN_REQUESTS)))
    finally:
        postgres.thaw()

    assert [answer.status_code for answer in answers] == [503] * FROZEN_REQUESTS
    assert all(answer.headers["retry-after"] == "1" for answer in answers)
    assert all(answer.json()["detail"] == "the database is unreachable; try again shortly"
               for answer in answers)  # fmt: skip
    with served.client(timeout=CLIENT_PATIENCE) as http:
        for _ in range(100):  # until the pool has reconnected
            recovered = http.get("/v1/sessions/k/messages")
            if recovered.status_code != 503:
                break
        assert recovered.status_code == 200
        assert [m["content"] for m in recovered.json()["items"]] == ["hi"]  # nothing half-done
        after = {"role": "user", "content": "after"}
        assert http.post("/v1/sessions/k/messages", json=after).status_code == 201


def _end_every_connection(url: str) -> int:
    """End every client connection to the database from the server side (this one's aside),
    wait until they are gone, and say how many there were."""
    with psycopg.connect(url, autocommit=True) as admin:
        pids = [
            row[0]
            for row in admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
            )
        ]
        admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (pids,))
        while admin.execute(
            "SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)
        ).fetchone():
            admin.execute("SELECT pg_sleep(0.01)")
    return len(pids)


def test_connections_the_server_ended_while_idle_cost_no_request(
    postgres: ThrowawayPostgres, tmp_path: Path
) -> None:
    """Two replicas on one database; every connection is ended while idle, three times over,
    and each time reads and appends go through both: every one succeeds, and the session holds
    each appended message once, in order."""
    with ExitStack() as replicas:
        served = [
            replicas.enter_context(serve(postgres.url, tmp_path / f"serve-{n}.log"))
            for n in range(2)
        ]
        clients = [replicas.enter_context(one.client(timeout=CLIENT_PATIENCE)) for one in served]
        assert clients[0].post("/v1/sessions", json={"key": "shared"}).status_code == 201

        def busy(http: httpx.Client) -> list[int]:
            """Reads at once on one replica, so its pool opens several connections."""
            with ThreadPoolExecutor(8) as pool:
                return list(
                    pool.map(lambda _: http.get("/v1/sessions/shared/messages").status_code,
                             range(16))
                )  # fmt: skip

        statuses: list[int] = []
        appended: list[str] = []
        for round_ in range(3):
            for http in clients:
                statuses += busy(http)
            assert _end_every_connection(postgres.url) >= 2  # both replicas' pools, idle
            for n in range(12):
                http = clients[n % 2]
                if n % 4 == 3:
                    content = f"round {round_} message {n}"
                    sent = http.post(
                        "/v1/sessions/shared/messages", json={"role": "user", "content": content}
                    )
                    statuses.append(sent.status_code)
                    appended.append(content)
                else:
                    statuses.append(http.get("/v1/sessions/shared/context").status_code)
        stored = clients[1].get("/v1/sessions/shared/messages", params={"limit": 100})

    assert [status for status in statuses if status not in (200, 201)] == []
    assert [m["content"] for m in stored.json()["items"]] == appended
