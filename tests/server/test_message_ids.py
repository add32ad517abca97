"""Message ids over HTTP: a retry is idempotent, a reused id with other content is a 409 naming
it, one id twice in a batch is a 422; text no backend stores is a 422 naming the field."""

from __future__ import annotations

import httpx
import pytest


@pytest.fixture
def session(client: httpx.Client) -> str:
    client.post("/v1/sessions", json={"key": "ids"})
    return "ids"


def test_a_reused_id_with_other_content_is_a_409_naming_it(
    client: httpx.Client, session: str
) -> None:
    url = f"/v1/sessions/{session}/messages"
    assert (
        client.post(url, json={"role": "user", "content": "Hi", "id": "turn-7"}).status_code == 201
    )
    response = client.post(url, json={"role": "user", "content": "Bye", "id": "turn-7"})
    assert response.status_code == 409
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "turn-7" in response.json()["detail"]
    assert [m["content"] for m in client.get(url).json()["items"]] == ["Hi"]


def test_one_id_twice_in_a_batch_is_a_422_and_stores_nothing(
    client: httpx.Client, session: str
) -> None:
    twice = [
        {"role": "user", "content": "a", "id": "x-1"},
        {"role": "user", "content": "a", "id": "x-1"},
    ]
    response = client.post(f"/v1/sessions/{session}/messages/batch", json={"messages": twice})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "messages[1].id"
    assert client.get(f"/v1/sessions/{session}").json()["message_count"] == 0


@pytest.mark.parametrize("escaped", ["a\\ud800", "nul \\u0000 byte"])
def test_text_no_backend_stores_is_a_422_naming_the_field(
    client: httpx.Client, session: str, escaped: str
) -> None:
    body = '{"role": "user", "content": "' + escaped + '"}'
    response = client.post(
        f"/v1/sessions/{session}/messages",
        content=body.encode(),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422
    assert "content" in response.text
    assert client.get(f"/v1/sessions/{session}").json()["message_count"] == 0
