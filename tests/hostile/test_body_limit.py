"""The request-size limit holds for every framing, and nobody gets a body read without a key.

Against `turnkeeper serve` itself (a subprocess), so the memory measured is the server's own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from .served import Served, send_chunked, serve

CHUNK = b"x" * 65536
MIB = 1024 * 1024


def chunks(total: int) -> Iterator[bytes]:
    for _ in range(total // len(CHUNK)):
        yield CHUNK


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("limit")
    with serve(f"sqlite:///{tmp / 'limit.db'}", tmp / "serve.log") as running:
        with running.client() as http:
            assert http.post("/v1/sessions", json={"key": "target"}).status_code == 201
        yield running


def stored_messages(served: Served) -> int:
    with served.client() as http:
        return int(http.get("/v1/sessions/target").json()["message_count"])


def test_a_chunked_body_over_the_limit_is_refused_with_413_and_not_buffered(
    served: Served,
) -> None:
    before, stored = served.rss_bytes(), stored_messages(served)
    answer = send_chunked(
        served.url,
        "/v1/sessions/target/messages",
        chunks(200 * MIB),
        {"Authorization": f"Bearer {served.key}", "Content-Type": "application/json"},
    )
    assert answer.status == 413
    assert answer.headers["content-type"] == "application/problem+json"
    problem = json.loads(answer.body)
    assert problem["status"] == 413 and "8388608 bytes" in problem["detail"]
    # 200 MiB went in; the server held at most about the limit (8 MiB) of it.
    assert served.rss_bytes() - before < 48 * MIB
    assert stored_messages(served) == stored


def test_a_chunked_body_without_a_key_is_refused_before_it_is_read(served: Served) -> None:
    answer = send_chunked(
        served.url,
        "/v1/sessions/target/messages",
        chunks(200 * MIB),
        {"Content-Type": "application/json"},
    )
    assert answer.status == 401
    assert answer.headers["www-authenticate"].startswith("Bearer")
    assert json.loads(answer.body)["status"] == 401


def test_a_small_body_without_a_key_is_never_parsed(served: Served) -> None:
    """Malformed JSON with no key: 401, not a 422 about the JSON (it was never read)."""
    answer = httpx.post(
        served.url + "/v1/sessions/target/messages",
        content=b"{not json",
        headers={"Content-Type": "application/json"},
    )
    assert answer.status_code == 401


def test_a_chunked_body_under_the_limit_is_accepted(served: Served) -> None:
    stored = stored_messages(served)
    body = json.dumps({"role": "user", "content": "y" * 200_000}).encode()
    answer = send_chunked(
        served.url,
        "/v1/sessions/target/messages",
        [body[i : i + 1000] for i in range(0, len(body), 1000)],
        {"Authorization": f"Bearer {served.key}", "Content-Type": "application/json"},
    )
    assert answer.status == 201, answer.body
    assert stored_messages(served) == stored + 1


def test_an_announced_length_over_the_limit_is_refused_at_once(served: Served) -> None:
    answer = httpx.post(
        served.url + "/v1/sessions",
        content=b"{}" + b" " * (9 * MIB),
        headers={"Authorization": f"Bearer {served.key}", "Content-Type": "application/json"},
    )
    assert answer.status_code == 413
    assert answer.headers["content-type"] == "application/problem+json"


def test_the_ui_reads_no_form_without_its_cookie(served: Served) -> None:
    stored = stored_messages(served)
    answer = send_chunked(
        served.url,
        "/sessions/target/messages",
        chunks(50 * MIB),
        {"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin"},
    )
    assert answer.status == 401
    assert stored_messages(served) == stored


@pytest.mark.parametrize("key", ["x-api-key", None], ids=["x-api-key", "no key"])
def test_the_messages_api_refuses_a_body_over_the_limit_in_anthropics_shape(
    served: Served, key: str | None
) -> None:
    """Anthropic's SDKs send the key as `x-api-key`: it is checked before a byte of the body is
    read, and the refusals come in Anthropic's error shape."""
    headers = {"Content-Type": "application/json", "X-Turnkeeper-Session": "target"}
    if key is not None:
        headers[key] = served.key
    before, stored = served.rss_bytes(), stored_messages(served)
    answer = send_chunked(served.url, "/v1/messages", chunks(100 * MIB), headers)
    assert answer.status == (413 if key else 401)
    error = json.loads(answer.body)
    assert error["type"] == "error"
    assert error["error"]["type"] == ("invalid_request_error" if key else "authentication_error")
    assert served.rss_bytes() - before < 48 * MIB
    assert stored_messages(served) == stored
