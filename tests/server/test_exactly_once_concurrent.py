"""Exactly once while the first attempt is still answering: a retry that arrives during the
model call waits for that call's outcome and answers with the same reply (or the same error),
and the model is asked once.

The model is the recording upstream, held by its gate until the retry has arrived: two
`/chat` calls with one `Idempotency-Key`, the same text twice without a key, the official
`openai` client's own retry after a client-side timeout (whole and streamed), on SQLite,
PostgreSQL and PostgreSQL + Redis; then two `turnkeeper serve` replicas on one database, the
retry sent to the other process, and a replica killed mid-turn (its turn is taken over once its
lease lapses: the waiting retry never waits forever).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

import turnkeeper
from turnkeeper import ChatTurns, NewMessage, Role
from turnkeeper.llm import Reply

from .conftest import Service, service_settings, start_service
from .upstream import Upstream

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "How many days in Lisbon?"
ARRIVAL = 1.0
"""Seconds a retry sent to another process (a replica) is given to reach it before the model
answers the first attempt: its arrival is not visible from here. A retry to the service in this
process is watched instead (`retry_waiting`). On code that asks the model again either shows as
a second upstream request, which ends the wait early."""


@pytest.fixture(params=["sqlite", "postgres", "postgres+redis"])
def service(
    request: pytest.FixtureRequest, tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> Iterator[Service]:
    """The service on each backend, retrying the upstream itself never (the client's retries
    are under test) and waiting long enough for a held model."""
    overrides: dict[str, Any] = {"llm_max_retries": 0, "llm_timeout": "30s"}
    if request.param != "sqlite":
        overrides["database_url"] = request.getfixturevalue("postgres_url")
    if request.param == "postgres+redis":
        overrides["redis_url"] = request.getfixturevalue("redis_server")
    yield from start_service(service_settings(tmp_path, upstream_server[1], **overrides))


def wait_until(condition: Callable[[], bool], what: str, *, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


@contextmanager
def held_model(upstream: Upstream) -> Iterator[threading.Event]:
    """The model holds every answer until the yielded gate is set (always set at the end)."""
    gate = threading.Event()
    upstream.gate = gate
    try:
        yield gate
    finally:
        gate.set()


@pytest.fixture
def retry_waiting(service: Service, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Set once a request waits inside the service for another's model call: only a waiting
    request looks up the turn's attempt (`get_turn_attempt`, after finding it held), so from
    then on the retry is certain to get the first attempt's outcome. A fixed pause instead let
    the model answer before a retry slowed by a loaded machine had arrived."""
    store = service.tk.store
    look_up = store.get_turn_attempt  # type: ignore[attr-defined]
    waiting = threading.Event()

    def get_turn_attempt(*args: Any, **kwargs: Any) -> Any:
        waiting.set()
        return look_up(*args, **kwargs)

    monkeypatch.setattr(store, "get_turn_attempt", get_turn_attempt)
    return waiting


def let_the_retry_arrive(upstream: Upstream, waiting: threading.Event | None) -> None:
    """Until the retry waits for the first attempt (`waiting`), or for `ARRIVAL` seconds when
    its arrival cannot be seen (`None`); a second upstream request ends the wait early."""
    if waiting is not None:
        wait_until(
            lambda: waiting.is_set() or len(upstream.requests) >= 2,
            "the retry to wait for the first attempt",
        )
        return
    deadline = time.monotonic() + ARRIVAL
    while time.monotonic() < deadline and len(upstream.requests) < 2:
        time.sleep(0.02)


def while_the_first_is_answered(
    upstream: Upstream,
    first: Callable[[], Any],
    retry: Callable[[], Any],
    waiting: threading.Event | None = None,
) -> tuple[Any, Any]:
    """`first()` until the model has its request, then `retry()` while the model holds its
    answer; the model answers once the retry has arrived (see `let_the_retry_arrive`). Both
    results."""
    with held_model(upstream) as gate, ThreadPoolExecutor(2) as pool:
        first_result: Future[Any] = pool.submit(first)
        wait_until(
            lambda: len(upstream.requests) >= 1 or first_result.done(),
            "the first attempt to ask the model",
        )
        assert not first_result.done(), first_result.result()
        retry_result: Future[Any] = pool.submit(retry)
        let_the_retry_arrive(upstream, waiting)
        gate.set()
        return first_result.result(timeout=60), retry_result.result(timeout=60)


def stored(client: httpx.Client, session: str) -> list[tuple[str, str]]:
    items = client.get(f"/v1/sessions/{session}/messages").json()["items"]
    return [(m["role"], m["content"]) for m in items]


def post_chat(
    service: Service, session: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> Callable[[], httpx.Response]:
    key = {"Authorization": f"Bearer {service.keys['a']}"}

    def call() -> httpx.Response:
        with httpx.Client(base_url=service.url, headers=key, timeout=60) as http:
            return http.post(f"/v1/sessions/{session}/chat", json=body, headers=headers or {})

    return call


@pytest.mark.parametrize(
    "headers", [{"Idempotency-Key": "order-7-question"}, {}], ids=["one-key", "same-text"]
)
def test_a_chat_retry_during_the_model_call_gets_the_same_reply_from_one_call(
    service: Service, client: httpx.Client, upstream: Upstream, headers: dict[str, str],
    retry_waiting: threading.Event,
) -> None:  # fmt: skip
    client.post("/v1/sessions", json={"key": "race"})
    ask = post_chat(service, "race", {"content": QUESTION}, headers)
    first, retry = while_the_first_is_answered(upstream, ask, ask, retry_waiting)
    assert first.status_code == retry.status_code == 200, (first.text, retry.text)
    assert retry.json()["reply"] == first.json()["reply"]
    assert (first.json()["replayed"], retry.json()["replayed"]) == (False, True)
    assert len(upstream.requests) == 1
    reply = first.json()["reply"]["content"]
    assert stored(client, "race") == [("user", QUESTION), ("assistant", reply)]


def test_a_streamed_chat_retry_during_the_model_call_streams_the_same_reply(
    service: Service, client: httpx.Client, upstream: Upstream, retry_waiting: threading.Event
) -> None:
    body = {"content": QUESTION, "create": True, "stream": True}
    ask = post_chat(service, "streams", body, {"Idempotency-Key": "streamed-question"})
    first, retry = while_the_first_is_answered(upstream, ask, ask, retry_waiting)
    done = [done_event(response) for response in (first, retry)]
    assert done[0]["reply"] == done[1]["reply"]
    assert (done[0]["replayed"], done[1]["replayed"]) == (False, True)
    assert len(upstream.requests) == 1
    assert stored(client, "streams") == [
        ("user", QUESTION),
        ("assistant", done[0]["reply"]["content"]),
    ]


def done_event(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    blocks = [block.split("\n") for block in response.text.strip().split("\n\n")]
    name, data = blocks[-1][0].removeprefix("event: "), blocks[-1][1].removeprefix("data: ")
    assert name == "done", response.text
    done: dict[str, Any] = json.loads(data)
    return done


def test_a_retry_waiting_on_a_failing_model_call_gets_the_same_error_and_a_later_one_asks_again(
    service: Service, client: httpx.Client, upstream: Upstream, retry_waiting: threading.Event
) -> None:
    client.post("/v1/sessions", json={"key": "failing"})
    upstream.failures = 1
    ask = post_chat(service, "failing", {"content": QUESTION}, {"Idempotency-Key": "q-1"})
    first, retry = while_the_first_is_answered(upstream, ask, ask, retry_waiting)
    assert first.status_code == retry.status_code == 502
    assert retry.json()["detail"] == first.json()["detail"]
    assert len(upstream.requests) == 1
    again = ask()  # after the failure: a new attempt, which asks the model
    assert again.status_code == 200 and again.json()["replayed"] is False
    assert len(upstream.requests) == 2
    reply = again.json()["reply"]["content"]
    assert stored(client, "failing") == [("user", QUESTION), ("assistant", reply)]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_sdks_retry_after_its_own_timeout_gets_the_first_attempts_reply(
    service: Service, client: httpx.Client, upstream: Upstream, stream: bool,
    retry_waiting: threading.Event,
) -> None:  # fmt: skip
    """The SDK gives up on its first request after `timeout` and sends it again with
    `x-stainless-retry-count: 1` while the service is still waiting for the model."""
    retried = threading.Event()

    def seen(request: httpx.Request) -> None:
        if request.headers.get("x-stainless-retry-count") == "1":
            retried.set()

    http = httpx.Client(event_hooks={"request": [seen]})
    llm = openai.OpenAI(
        base_url=f"{service.url}/v1", api_key=service.keys["a"], max_retries=1, timeout=3,
        http_client=http,
    )  # fmt: skip

    def ask() -> str:
        messages: Any = [{"role": "user", "content": QUESTION}]
        headers = {"X-Turnkeeper-Session": "sdk"}
        if stream:
            chunks = llm.chat.completions.create(
                model="m", messages=messages, stream=True, extra_headers=headers
            )
            return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        answer = llm.chat.completions.create(model="m", messages=messages, extra_headers=headers)
        return answer.choices[0].message.content or ""

    with llm, held_model(upstream) as gate, ThreadPoolExecutor(1) as pool:
        text = pool.submit(ask)
        wait_until(retried.is_set, "the SDK to time out and retry")
        let_the_retry_arrive(upstream, retry_waiting)
        gate.set()
        answer = text.result(timeout=60)
    assert len(upstream.requests) == 1
    assert answer and stored(client, "sdk") == [("user", QUESTION), ("assistant", answer)]


# -- two processes on one database ------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'replicas.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@contextmanager
def replica(database: str, upstream_url: str, **settings: str) -> Iterator[tuple[str, int]]:
    """`turnkeeper serve --no-auth` as a process of its own on `database`; its URL and pid."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("TURNKEEPER_")}
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    env |= {
        "PYTHONPATH": path,
        "TURNKEEPER_CONFIG": os.devnull,
        "TURNKEEPER_LLM_BASE_URL": f"{upstream_url}/v1",
        "TURNKEEPER_LLM_MODEL": "test-model",
        "TURNKEEPER_LLM_TIMEOUT": "30s",
        "TURNKEEPER_LLM_MAX_RETRIES": "0",
        "TURNKEEPER_SQLITE_WRITER_LOCK_FILE": "true",
    } | {f"TURNKEEPER_{name.upper()}": value for name, value in settings.items()}
    process = subprocess.Popen(
        [sys.executable, "-m", "turnkeeper", "serve", "--no-auth", "--port", "0", "--db", database],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, text=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        banner = process.stderr.readline()
        match = re.search(r"serving on (http://\S+)", banner)
        assert match, banner
        url = match.group(1)
        wait_until(lambda: _answers(url), f"{url} to answer", within=60)
        yield url, process.pid
    finally:
        if process.poll() is None:
            process.terminate()
        process.wait(timeout=20)
        assert process.stderr is not None
        process.stderr.close()


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz").status_code == 200
    except httpx.TransportError:
        return False


def chat_at(
    url: str, body: dict[str, Any], headers: dict[str, str]
) -> Callable[[], httpx.Response]:
    def call() -> httpx.Response:
        return httpx.post(f"{url}/v1/sessions/shared/chat", json=body, headers=headers, timeout=60)

    return call


@pytest.mark.parametrize(
    "headers", [{"Idempotency-Key": "order-7-question"}, {}], ids=["one-key", "same-text"]
)
def test_a_retry_on_another_replica_waits_for_the_first_replicas_model_call(
    database: str, upstream_server: tuple[Upstream, str], upstream: Upstream,
    headers: dict[str, str],
) -> None:  # fmt: skip
    body = {"content": QUESTION, "create": True}
    with (
        replica(database, upstream_server[1]) as (one, _),
        replica(database, upstream_server[1]) as (two, _),
    ):
        httpx.post(f"{one}/v1/sessions", json={"key": "shared"})
        first, retry = while_the_first_is_answered(
            upstream, chat_at(one, body, headers), chat_at(two, body, headers)
        )
        history = httpx.get(f"{two}/v1/sessions/shared/messages").json()["items"]
    assert first.status_code == retry.status_code == 200, (first.text, retry.text)
    assert retry.json()["reply"] == first.json()["reply"]
    assert len(upstream.requests) == 1
    reply = first.json()["reply"]["content"]
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", QUESTION), ("assistant", reply)
    ]  # fmt: skip


def test_a_turn_whose_replica_dies_is_taken_over_by_the_waiting_retry(
    database: str, upstream_server: tuple[Upstream, str], upstream: Upstream
) -> None:
    """The first replica is killed while the model works on its turn: no outcome will ever
    come, its lease stops being renewed, and once it lapses the retry on the other replica
    asks the model itself (the only way to answer), storing the turn's reply once."""
    body, key = {"content": QUESTION, "create": True}, {"Idempotency-Key": "orphaned"}
    with (
        replica(database, upstream_server[1], turn_lease="1s") as (one, pid),
        replica(database, upstream_server[1], turn_lease="1s") as (two, _),
        held_model(upstream) as gate,
        ThreadPoolExecutor(1) as pool,
    ):
        pool.submit(chat_at(one, body, key))  # its answer never comes: the replica dies
        wait_until(lambda: len(upstream.requests) == 1, "the first replica to ask the model")
        os.kill(pid, signal.SIGKILL)
        gate.set()
        retry = chat_at(two, body, key)()
        history = httpx.get(f"{two}/v1/sessions/shared/messages").json()["items"]
    assert retry.status_code == 200, retry.text
    assert len(upstream.requests) == 2
    assert [m["content"] for m in upstream.requests[1]["messages"]] == [QUESTION]
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", QUESTION), ("assistant", retry.json()["reply"]["content"])
    ]  # fmt: skip


def test_a_retry_waiting_past_the_longest_hold_is_a_409_with_retry_after_and_then_the_reply(
    tmp_path: Path, upstream_server: tuple[Upstream, str], upstream: Upstream
) -> None:
    """A turn held longer than this service ever waits (by a replica with a lease of a minute
    that sends the request itself): the retry is a 409 saying when to come back, which the
    OpenAI SDK may retry, and once the holder has its reply the same request gets it."""
    quick = {"llm_timeout": "1s", "llm_max_retries": 0, "turn_lease": "500ms"}
    settings = service_settings(tmp_path, upstream_server[1], **quick)
    holder_settings = service_settings(tmp_path, upstream_server[1], turn_lease="60s")
    holder = turnkeeper.open(settings=holder_settings)
    for service in start_service(settings):
        session, _ = holder.get_or_create_session("held", project="alpha")
        with ChatTurns.open(holder) as replica:
            question = NewMessage(role=Role.USER, content=QUESTION)
            prepared = replica.prepare(session, [question])
            with openai.OpenAI(
                base_url=f"{service.url}/v1", api_key=service.keys["a"], max_retries=0
            ) as llm:
                messages: Any = [{"role": "user", "content": QUESTION}]
                headers = {"X-Turnkeeper-Session": "held"}
                with pytest.raises(openai.ConflictError) as raised:
                    llm.chat.completions.create(model="m", messages=messages, extra_headers=headers)
                reply, _ = replica.finish(prepared, Reply(content="from the holder"), started=0)
                retried = headers | {"x-stainless-retry-count": "1"}  # as the SDK's own retry
                again = llm.chat.completions.create(
                    model="m", messages=messages, extra_headers=retried
                )
    holder.close()
    response = raised.value.response
    assert response.headers["retry-after"] == "1" and "x-should-retry" not in response.headers
    assert "still being answered" in raised.value.message
    assert again.choices[0].message.content == reply.content == "from the holder"
    assert upstream.requests == []
