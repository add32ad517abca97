"""`/v1/sessions`: the session lifecycle over HTTP, and the problems each misuse gets."""

from __future__ import annotations

import httpx

from .conftest import Service

PROBLEM = "application/problem+json"


def test_creates_a_session_in_the_keys_project(client: httpx.Client) -> None:
    response = client.post(
        "/v1/sessions",
        json={"key": "dev-task-F1", "subject": "ticket-42", "kind": "dev-task", "title": "Leak",
              "metadata": {"agent_id": "a7"}},
    )  # fmt: skip
    assert response.status_code == 201
    session = response.json()
    assert session["project"] == "alpha"
    assert session["status"] == "active"
    assert session["metadata"] == {"agent_id": "a7"}
    assert session["expires_at"] is None  # by default, sessions never expire


def test_get_or_create_returns_the_live_session_holding_the_key(client: httpx.Client) -> None:
    first = client.post("/v1/sessions", json={"key": "k", "get_or_create": True})
    again = client.post("/v1/sessions", json={"key": "k", "get_or_create": True})
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]


def test_a_key_held_by_a_live_session_is_a_409(client: httpx.Client) -> None:
    client.post("/v1/sessions", json={"key": "k"})
    response = client.post("/v1/sessions", json={"key": "k"})
    assert response.status_code == 409
    assert response.headers["content-type"] == PROBLEM


def test_ttl_null_makes_a_session_that_never_expires(client: httpx.Client) -> None:
    session = client.post("/v1/sessions", json={"ttl_seconds": None}).json()
    assert session["expires_at"] is None


def test_gets_a_session_by_id_or_by_key(client: httpx.Client) -> None:
    created = client.post("/v1/sessions", json={"key": "by-key"}).json()
    assert client.get(f"/v1/sessions/{created['id']}").json()["key"] == "by-key"
    assert client.get("/v1/sessions/by-key").json()["id"] == created["id"]


def test_lists_with_filters_and_cursor_pages(client: httpx.Client) -> None:
    for n in range(5):
        client.post("/v1/sessions", json={"key": f"s{n}", "subject": "ticket-1" if n % 2 else "x"})
    first = client.get("/v1/sessions", params={"limit": 2}).json()
    second = client.get("/v1/sessions", params={"limit": 2, "cursor": first["next_cursor"]}).json()
    third = client.get("/v1/sessions", params={"limit": 2, "cursor": second["next_cursor"]}).json()
    keys = [s["key"] for page in (first, second, third) for s in page["items"]]
    assert sorted(keys) == ["s0", "s1", "s2", "s3", "s4"]
    assert third["next_cursor"] is None
    tickets = client.get("/v1/sessions", params={"subject": "ticket-1"}).json()["items"]
    assert sorted(s["key"] for s in tickets) == ["s1", "s3"]


def test_update_changes_only_the_fields_sent(client: httpx.Client) -> None:
    client.post("/v1/sessions", json={"key": "u", "title": "old", "phase": "plan"})
    updated = client.patch("/v1/sessions/u", json={"title": "new"}).json()
    assert (updated["title"], updated["phase"]) == ("new", "plan")
    assert updated["version"] == 1


def test_reset_keeps_the_system_message_when_asked(client: httpx.Client) -> None:
    client.post("/v1/sessions", json={"key": "r"})
    client.post(
        "/v1/sessions/r/messages/batch",
        json={"messages": [{"role": "system", "content": "Be brief."},
                           {"role": "user", "content": "Hi"}]},
    )  # fmt: skip
    reset = client.post("/v1/sessions/r/reset", json={"keep_system_message": True}).json()
    assert reset["message_count"] == 1
    history = client.get("/v1/sessions/r/messages").json()["items"]
    assert [m["role"] for m in history] == ["system"]


def test_archive_frees_the_key_for_a_new_session(client: httpx.Client) -> None:
    old = client.post("/v1/sessions", json={"key": "a"}).json()
    assert client.post("/v1/sessions/a/archive").json()["status"] == "archived"
    new = client.post("/v1/sessions", json={"key": "a"})
    assert new.status_code == 201
    assert new.json()["id"] != old["id"]


def test_delete_removes_the_session(client: httpx.Client) -> None:
    client.post("/v1/sessions", json={"key": "d"})
    assert client.delete("/v1/sessions/d").status_code == 204
    missing = client.get("/v1/sessions/d")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == PROBLEM


def test_an_expired_session_is_a_410_for_live_operations(
    service: Service, client: httpx.Client
) -> None:
    session = client.post("/v1/sessions", json={"key": "e", "ttl_seconds": 0.01}).json()
    service.tk.transfer.expire()  # the sweeper's job; here by hand
    response = client.post("/v1/sessions/e/chat", json={"content": "still there?"})
    context = client.get(f"/v1/sessions/{session['id']}/context")
    assert (response.status_code, context.status_code) == (410, 410)
    assert context.json()["title"] == "Gone"
    assert client.get(f"/v1/sessions/{session['id']}").json()["status"] == "expired"


def test_bad_fields_are_a_422_naming_each_field(client: httpx.Client) -> None:
    response = client.post(
        "/v1/sessions", json={"key": "has space", "ttl_seconds": -1, "colour": "red"}
    )
    assert response.status_code == 422
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert {e["field"] for e in problem["errors"]} == {"key", "ttl_seconds", "colour"}
    assert set(problem) >= {"type", "title", "status", "detail", "instance"}


def test_a_bad_query_value_is_a_422_naming_it(client: httpx.Client) -> None:
    response = client.get("/v1/sessions", params={"limit": 0, "status": "sleeping"})
    assert response.status_code == 422
    assert {e["field"] for e in response.json()["errors"]} == {"limit", "status"}


def test_a_body_that_is_not_json_is_a_422(client: httpx.Client) -> None:
    response = client.post(
        "/v1/sessions", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert response.headers["content-type"] == PROBLEM


def test_unknown_routes_and_methods_are_problems_too(client: httpx.Client) -> None:
    assert client.get("/v1/nothing-here").headers["content-type"] == PROBLEM
    wrong_method = client.put("/v1/sessions")
    assert wrong_method.status_code == 405
    assert wrong_method.json()["status"] == 405
