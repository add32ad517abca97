"""A session key is a segment of the URLs that reach its session, so a new key may not hold
`/` (even sent as `%2F` it splits the path, and no URL could reach the session): refused when a
session is made, naming the field and the characters a key may hold, through the library, HTTP
and the CLI. A key stored before the rule stays reachable: by id everywhere, by key where it is
not a URL path segment, and listed by the `key` filter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import turnkeeper
from tests.server.conftest import Service
from turnkeeper.errors import InvalidInput
from turnkeeper.service import Turnkeeper
from turnkeeper.types import NewSession

from .conftest import snapshot
from .served import run_cli

ALLOWED = "use 1-255 letters, digits or . _ : @ + = ~ - (no /), starting with a letter or digit"


@pytest.mark.parametrize(
    "make",
    [
        lambda tk: tk.create_session(key="a/b"),
        lambda tk: tk.get_or_create_session("a/b"),
        lambda tk: tk.fork(tk.create_session(key="source"), 0, key="team/1"),
    ],
    ids=["create", "get or create", "fork"],
)
def test_the_library_refuses_a_new_key_with_a_slash_saying_what_a_key_may_hold(
    tk: Turnkeeper, make: object
) -> None:
    with pytest.raises(InvalidInput) as refused:
        make(tk)  # type: ignore[operator]
    assert refused.value.field == "key"
    assert refused.value.problem.endswith(f"is not a valid key: {ALLOWED}")
    assert [s.key for s in tk.list_sessions().items] in ([], ["source"])


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/sessions", {"key": "a/b"}),
        ("/v1/sessions", {"key": "a/b", "get_or_create": True}),
        ("/v1/sessions/target/fork", {"at_seq": 0, "key": "a/b"}),
    ],
)
def test_http_refuses_a_new_key_with_a_slash_naming_the_field(
    hostile_service: Service, path: str, body: dict[str, object]
) -> None:
    before = snapshot(hostile_service.tk)
    with hostile_service.client("a") as http:
        response = http.post(path, json=body)
    assert response.status_code == 422
    assert [error["field"] for error in response.json()["errors"]] == ["key"]
    assert snapshot(hostile_service.tk) == before


def test_the_proxy_refuses_a_session_header_with_a_slash(hostile_service: Service) -> None:
    before = snapshot(hostile_service.tk)
    with hostile_service.client("a") as http:
        response = http.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "x"}]},
            headers={"X-Turnkeeper-Session": "new/one"},
        )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["param"] == "key" and ALLOWED in error["message"]
    assert snapshot(hostile_service.tk) == before


@pytest.mark.parametrize(
    "args",
    [("sessions", "create", "--key", "a/b"), ("add", "a/b", "--role", "user", "hi")],
    ids=["sessions create", "add to a new key"],
)
def test_the_cli_refuses_a_new_key_with_a_slash_in_one_line(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    db = f"sqlite:///{tmp_path / 'keys.db'}"
    result = run_cli(*args, "--db", db)
    assert result.returncode == 1
    assert result.stderr.decode().strip() == f"error: key: 'a/b' is not a valid key: {ALLOWED}"
    listed = run_cli("sessions", "list", "--json", "--db", db)
    assert json.loads(listed.stdout)["sessions"] == []


def test_a_key_with_a_slash_stored_before_the_rule_stays_reachable(
    hostile_service: Service, tmp_path: Path
) -> None:
    """Written as an older version stored it (straight to the store), then reached through
    every interface that can name it."""
    tk = hostile_service.tk
    legacy = tk.store.create_session(NewSession(project="alpha", key="team/42"), now=tk.now())
    try:
        tk.append("team/42", "user", "from the library", project="alpha")
        with hostile_service.client("a") as http:
            listed = http.get("/v1/sessions", params={"key": "team/42"}).json()["items"]
            assert [s["id"] for s in listed] == [legacy.id]
            appended = http.post(
                f"/v1/sessions/{legacy.id}/messages", json={"role": "user", "content": "by id"}
            )
            assert appended.status_code == 201
            assert http.get(f"/v1/sessions/{legacy.id}").json()["key"] == "team/42"
        db = hostile_service.tk.settings.database_url
        added = run_cli("add", "team/42", "--role", "user", "from the CLI", "--project", "alpha",
                        "--db", db)  # fmt: skip
        assert added.returncode == 0, added.stderr.decode()
        shown = run_cli("history", "team/42", "--project", "alpha", "--json", "--db", db)
        assert [m["content"] for m in json.loads(shown.stdout)["messages"]] == [
            "from the library", "by id", "from the CLI",
        ]  # fmt: skip
        with turnkeeper.open(db) as other:
            assert other.get_session("team/42", project="alpha").id == legacy.id
    finally:
        tk.delete_session(legacy.id)
