"""`POST /v1/sessions/{s}/fork` and `GET …/branches`: branches over HTTP, and their problems."""

from __future__ import annotations

import httpx
import pytest

from .conftest import Service

PROBLEM = "application/problem+json"


@pytest.fixture
def source(client: httpx.Client) -> str:
    client.post("/v1/sessions", json={"key": "trip", "title": "Trip"})
    turns = [
        {"role": "user" if n % 2 else "assistant", "content": f"turn {n}"} for n in range(1, 5)
    ]
    client.post("/v1/sessions/trip/messages/batch", json={"messages": turns})
    return "trip"


def _contents(client: httpx.Client, session: str) -> list[str]:
    items = client.get(f"/v1/sessions/{session}/messages").json()["items"]
    return [m["content"] for m in items]


def test_a_fork_is_a_new_session_with_the_prefix_and_its_own_appends(
    client: httpx.Client, source: str
) -> None:
    response = client.post(f"/v1/sessions/{source}/fork", json={"at_seq": 2, "key": "trip-b"})
    assert response.status_code == 201
    branch = response.json()
    assert (branch["key"], branch["title"], branch["message_count"]) == ("trip-b", "Trip", 2)
    client.post("/v1/sessions/trip-b/messages", json={"role": "user", "content": "other way"})
    assert _contents(client, "trip-b") == ["turn 1", "turn 2", "other way"]
    assert _contents(client, source) == ["turn 1", "turn 2", "turn 3", "turn 4"]
    stats = client.get("/v1/sessions/trip-b/stats").json()
    assert stats["message_count"] == 3
    window = client.get("/v1/sessions/trip-b/context").json()
    assert [m["content"] for m in window["messages"]] == ["turn 1", "turn 2", "other way"]


def test_branches_list_the_forks_and_a_branch_says_where_it_came_from(
    client: httpx.Client, source: str
) -> None:
    first = client.post(f"/v1/sessions/{source}/fork", json={"at_seq": 1}).json()
    second = client.post(f"/v1/sessions/{source}/fork", json={"at_seq": 3}).json()
    listed = client.get(f"/v1/sessions/{source}/branches").json()
    assert listed["forked_from"] is None
    assert [(b["session_id"], b["forked_at_seq"]) for b in listed["branches"]] == [
        (first["id"], 1),
        (second["id"], 3),
    ]
    origin = client.get(f"/v1/sessions/{second['id']}/branches").json()["forked_from"]
    source_id = client.get(f"/v1/sessions/{source}").json()["id"]
    assert (origin["parent_id"], origin["forked_at_seq"]) == (source_id, 3)


def test_deleting_the_source_leaves_the_branch_readable(client: httpx.Client, source: str) -> None:
    branch = client.post(f"/v1/sessions/{source}/fork", json={"at_seq": 3}).json()
    assert client.delete(f"/v1/sessions/{source}").status_code == 204
    assert _contents(client, branch["id"]) == ["turn 1", "turn 2", "turn 3"]
    origin = client.get(f"/v1/sessions/{branch['id']}/branches").json()["forked_from"]
    assert origin["forked_at_seq"] == 3


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"at_seq": 5}, "at_seq"),
        ({"at_seq": -1}, "at_seq"),
        ({}, "at_seq"),
        ({"at_seq": "x"}, "at_seq"),
    ],
)
def test_a_fork_point_outside_the_history_is_a_422_naming_at_seq(
    client: httpx.Client, source: str, body: dict[str, object], field: str
) -> None:
    response = client.post(f"/v1/sessions/{source}/fork", json=body)
    assert response.status_code == 422
    assert response.headers["content-type"] == PROBLEM
    assert [e["field"] for e in response.json()["errors"]] == [field]


def test_an_archived_source_or_a_taken_key_is_a_409(client: httpx.Client, source: str) -> None:
    client.post("/v1/sessions", json={"key": "taken"})
    taken = client.post(f"/v1/sessions/{source}/fork", json={"at_seq": 1, "key": "taken"})
    assert taken.status_code == 409 and "taken" in taken.json()["detail"]
    client.post(f"/v1/sessions/{source}/archive")
    archived = client.post(f"/v1/sessions/{source}/fork", json={"at_seq": 1})
    assert archived.status_code == 409
    assert "archived" in archived.json()["detail"]


def test_another_projects_session_cannot_be_forked_or_listed(service: Service, source: str) -> None:
    with service.client("b") as beta:
        source_id = beta.get("/v1/sessions/trip").status_code
        assert source_id == 404
        with service.client("a") as alpha:
            real_id = alpha.get(f"/v1/sessions/{source}").json()["id"]
        fork = beta.post(f"/v1/sessions/{real_id}/fork", json={"at_seq": 1})
        branches = beta.get(f"/v1/sessions/{real_id}/branches")
    assert (fork.status_code, branches.status_code) == (404, 404)
    assert fork.headers["content-type"] == PROBLEM
