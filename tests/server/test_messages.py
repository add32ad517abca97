"""`/v1/sessions/{session}/messages`: appends (idempotent by id, atomic batches) and reads."""

from __future__ import annotations

import httpx
import pytest


@pytest.fixture
def session(client: httpx.Client) -> str:
    client.post("/v1/sessions", json={"key": "m"})
    return "m"


def test_appending_the_same_id_twice_stores_it_once(client: httpx.Client, session: str) -> None:
    body = {"role": "user", "content": "Hello", "id": "msg-1", "author": "ana"}
    first = client.post(f"/v1/sessions/{session}/messages", json=body)
    again = client.post(f"/v1/sessions/{session}/messages", json=body)
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json()
    assert client.get(f"/v1/sessions/{session}").json()["message_count"] == 1


def test_a_batch_is_appended_in_order_with_gapless_seqs(client: httpx.Client, session: str) -> None:
    messages = [{"role": "user", "content": f"turn {n}"} for n in range(3)]
    stored = client.post(f"/v1/sessions/{session}/messages/batch", json={"messages": messages})
    assert [m["seq"] for m in stored.json()] == [1, 2, 3]


def test_a_batch_with_one_bad_message_stores_nothing(client: httpx.Client, session: str) -> None:
    messages = [{"role": "user", "content": "fine"}, {"role": "user", "content": "  "}]
    response = client.post(f"/v1/sessions/{session}/messages/batch", json={"messages": messages})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "messages[1].content"
    assert client.get(f"/v1/sessions/{session}").json()["message_count"] == 0


def test_a_stale_expected_last_seq_is_a_409(client: httpx.Client, session: str) -> None:
    client.post(f"/v1/sessions/{session}/messages", json={"role": "user", "content": "one"})
    stale = {"role": "user", "content": "two", "expected_last_seq": 0}
    assert client.post(f"/v1/sessions/{session}/messages", json=stale).status_code == 409


def test_content_over_the_limit_is_a_413(service_small_messages: httpx.Client) -> None:
    client = service_small_messages
    client.post("/v1/sessions", json={"key": "big"})
    response = client.post(
        "/v1/sessions/big/messages", json={"role": "user", "content": "x" * 2000}
    )
    assert response.status_code == 413
    assert response.json()["errors"] == [
        {"field": "content", "problem": "is 2000 bytes; the limit is 1000 bytes"}
    ]


def test_a_body_over_the_request_limit_is_a_413_before_it_is_read(
    service_small_messages: httpx.Client,
) -> None:
    response = service_small_messages.post(
        "/v1/sessions/big/messages", json={"role": "user", "content": "x" * 50_000}
    )
    assert response.status_code == 413
    assert response.headers["content-type"] == "application/problem+json"


def test_lists_a_page_then_the_next(client: httpx.Client, session: str) -> None:
    messages = [{"role": "user", "content": f"turn {n}"} for n in range(5)]
    client.post(f"/v1/sessions/{session}/messages/batch", json={"messages": messages})
    page = client.get(f"/v1/sessions/{session}/messages", params={"limit": 2}).json()
    assert [m["seq"] for m in page["items"]] == [1, 2]
    rest = client.get(
        f"/v1/sessions/{session}/messages", params={"from_seq": page["next_from_seq"]}
    ).json()
    assert [m["seq"] for m in rest["items"]] == [3, 4, 5]
    assert rest["next_from_seq"] is None


def test_lists_a_seq_range_newest_first(client: httpx.Client, session: str) -> None:
    messages = [{"role": "user", "content": f"turn {n}"} for n in range(5)]
    client.post(f"/v1/sessions/{session}/messages/batch", json={"messages": messages})
    page = client.get(
        f"/v1/sessions/{session}/messages",
        params={"from_seq": 2, "to_seq": 4, "newest_first": True, "limit": 2},
    ).json()
    assert [m["seq"] for m in page["items"]] == [4, 3]
    assert page["next_to_seq"] == 2


def test_user_facing_listing_leaves_internal_messages_out(
    client: httpx.Client, session: str
) -> None:
    messages = [
        {"role": "user", "content": "visible"},
        {"role": "assistant", "content": "tool chatter", "internal": True},
    ]
    client.post(f"/v1/sessions/{session}/messages/batch", json={"messages": messages})
    everything = client.get(f"/v1/sessions/{session}/messages").json()["items"]
    facing = client.get(
        f"/v1/sessions/{session}/messages", params={"include_internal": False}
    ).json()["items"]
    assert (len(everything), [m["content"] for m in facing]) == (2, ["visible"])
