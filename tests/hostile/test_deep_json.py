"""JSON nested too deep: refused where it comes in, naming the field, on every interface; and a
value already stored too deep (before the limit, or written with SQL) never makes a read fail:
every interface reads it with the part beyond the limit cut off, saying so."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

import turnkeeper
from tests.cli import seeding
from tests.conftest import run_async
from tests.mcp_server.clients import document, error_of, over_http
from tests.server.conftest import Service, service_settings, start_service
from tests.server.upstream import Upstream
from turnkeeper.jsonenc import too_deep
from turnkeeper.validation import MAX_JSON_DEPTH

from .conftest import snapshot
from .served import run_cli

CUT = too_deep(MAX_JSON_DEPTH)
"""What a read puts where it cut a value off."""


def nested(levels: int) -> dict[str, Any]:
    """`{"a": {"a": … "leaf" …}}`: `levels` objects, one in the other (built without recursion)."""
    value: Any = "leaf"
    for _ in range(levels):
        value = {"a": value}
    return dict(value)


def nested_text(levels: int) -> str:
    """`nested(levels)` as JSON text, for depths no JSON library writes."""
    return '{"a":' * levels + '"leaf"' + "}" * levels


def chain(value: Any) -> tuple[int, Any]:
    """How many objects of `nested`'s shape `value` holds, one in the other, and what is at the
    bottom."""
    levels = 0
    while isinstance(value, dict):
        levels, value = levels + 1, value["a"]
    return levels, value


# -- refused at the door ------------------------------------------------------------------

TOO_DEEP = MAX_JSON_DEPTH + 1
RED_TEAM = 300
"""The red team's depth: stored, then every read of the session answered 500."""


def _message(**fields: Any) -> dict[str, Any]:
    return {"role": "user", "content": "hello"} | fields


def _call(**extra: Any) -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}} | extra


DEEP_BODIES = [
    ("POST", "/v1/sessions/target/messages", _message(metadata=nested(TOO_DEEP)), "metadata"),
    ("POST", "/v1/sessions/target/messages", _message(metadata=nested(RED_TEAM)), "metadata"),
    (
        "POST",
        "/v1/sessions/target/messages/batch",
        {"messages": [_message(), _message(metadata=nested(RED_TEAM))]},
        "messages[1].metadata",
    ),
    (
        "POST",
        "/v1/sessions/target/messages",
        _message(role="assistant", content="", tool_calls=[_call(extra=nested(RED_TEAM))]),
        "tool_calls",
    ),
    ("POST", "/v1/sessions", {"key": "deep", "metadata": nested(RED_TEAM)}, "metadata"),
    ("PATCH", "/v1/sessions/target", {"metadata": nested(TOO_DEEP)}, "metadata"),
    ("POST", "/v1/sessions/target/fork", {"at_seq": 1, "metadata": nested(RED_TEAM)}, "metadata"),
    (
        "POST",
        "/v1/sessions/target/chat",
        {"content": "hi", "metadata": nested(RED_TEAM)},
        "metadata",
    ),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    DEEP_BODIES,
    ids=[f"{method} {path} {field}" for method, path, _, field in DEEP_BODIES],
)
def test_a_value_nested_too_deep_is_a_422_naming_its_field_and_changes_nothing(
    hostile_service: Service, method: str, path: str, body: dict[str, Any], field: str
) -> None:
    before = snapshot(hostile_service.tk)
    with hostile_service.client("a") as http:
        response = http.request(method, path, json=body)
    assert response.status_code == 422, response.text[:300]
    (error,) = response.json()["errors"]
    assert error == {
        "field": field,
        "problem": f"nests objects and arrays more than {MAX_JSON_DEPTH} levels deep",
    }
    assert snapshot(hostile_service.tk) == before


def test_a_value_nested_exactly_to_the_limit_is_stored_and_read_back_whole(
    hostile_service: Service,
) -> None:
    with hostile_service.client("a") as http:
        created = http.post("/v1/sessions", json={"metadata": nested(MAX_JSON_DEPTH)})
        assert created.status_code == 201, created.text[:300]
        read = http.get(f"/v1/sessions/{created.json()['id']}")
        assert chain(read.json()["metadata"]) == (MAX_JSON_DEPTH, "leaf")
        http.delete(f"/v1/sessions/{created.json()['id']}")


def test_a_value_nested_too_deep_is_a_tool_error_over_mcp(hostile_service: Service) -> None:
    before = snapshot(hostile_service.tk)

    async def append() -> str:
        async with over_http(hostile_service.url, hostile_service.keys["a"]) as mcp:
            result = await mcp.call_tool(
                "append_message",
                {"session": "target", "content": "x", "metadata": nested(TOO_DEEP)},
            )
            return error_of(result)

    assert run_async(append()) == (
        f"metadata: nests objects and arrays more than {MAX_JSON_DEPTH} levels deep"
    )
    assert snapshot(hostile_service.tk) == before


@pytest.mark.parametrize(
    "args",
    [
        ("sessions", "create", "--metadata", nested_text(10_000)),
        ("add", "s", "--role", "user", "hi", "--metadata", nested_text(10_000)),
        ("add", "s", "--role", "user", "hi", "--metadata", json.dumps(nested(TOO_DEEP))),
    ],
    ids=["create 10,000 deep", "add 10,000 deep", "add one level too deep"],
)
def test_a_value_nested_too_deep_is_one_error_line_on_the_cli(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    seeding.create(db, key="s")  # in-process: only the refused command is under test
    result = run_cli(*args, "--db", db)
    stderr = result.stderr.decode()
    assert result.returncode == 1 and "Traceback" not in stderr, stderr
    assert stderr.strip() == (
        f"error: metadata: nests objects and arrays more than {MAX_JSON_DEPTH} levels deep"
    )
    listed = run_cli("sessions", "list", "--json", "--db", db)
    assert [s["key"] for s in json.loads(listed.stdout)["sessions"]] == ["s"]


def test_a_value_over_the_size_limit_is_a_413_naming_its_field(
    tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> None:
    settings = service_settings(tmp_path, upstream_server[1], max_json_bytes=1000)
    for running in start_service(settings):
        with running.client("a") as http:
            assert http.post("/v1/sessions", json={"key": "s"}).status_code == 201
            fits = http.post("/v1/sessions/s/messages", json=_message(metadata={"t": "x" * 990}))
            assert fits.status_code == 201, fits.text[:300]
            metadata = {"t": "é" * 500}  # 1,000 bytes of UTF-8, 1,008 as compact JSON
            too_big = http.post("/v1/sessions/s/messages", json=_message(metadata=metadata))
            assert too_big.status_code == 413
            size = len(json.dumps(metadata, separators=(",", ":"), ensure_ascii=False).encode())
            assert too_big.json()["errors"] == [
                {
                    "field": "metadata",
                    "problem": f"is {size} bytes as JSON; the limit is 1000 bytes",
                }
            ]
            assert len(http.get("/v1/sessions/s/messages").json()["items"]) == 1


# -- stored too deep, still read --------------------------------------------------------------

STORED_DEPTH = 5_000
"""Deeper than Python's json module reads (about 1,000), and than PostgreSQL's `jsonb` needs
(it takes a few thousand levels with its default stack)."""


@dataclass
class Poisoned:
    """A service over a database in which SQL wrote values nested too deep: session `deep` of
    project alpha (metadata 300 levels deep), its user message (metadata `STORED_DEPTH` deep)
    and its assistant reply (a tool call holding 300 levels)."""

    service: Service
    database_url: str
    session_id: str


def _poison(url: str, session_id: str) -> None:
    """Write the deep values with SQL, and move the session's version on (as a write would, so
    no cache holds what was there before)."""
    call = json.dumps(_call())
    tool_calls = f'[{call.removesuffix("}")}, "extra": {nested_text(RED_TEAM)}}}]'
    statements = [
        ("UPDATE messages SET metadata = ? WHERE session_id = ? AND seq = 1",
         (nested_text(STORED_DEPTH), session_id)),
        ("UPDATE messages SET tool_calls = ? WHERE session_id = ? AND seq = 2",
         (tool_calls, session_id)),
        ("UPDATE sessions SET metadata = ?, version = version + 1 WHERE id = ?",
         (nested_text(RED_TEAM), session_id)),
    ]  # fmt: skip
    if url.startswith("sqlite:"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            for query, params in statements:
                conn.execute(query, params)
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for query, params in statements:
            conn.execute(query.replace("= ?,", "= %s::jsonb,").replace("?", "%s"), params)


@pytest.fixture(params=["sqlite", "postgres", "postgres+redis"])
def poisoned(
    request: pytest.FixtureRequest, tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> Iterator[Poisoned]:
    overrides: dict[str, Any] = {}
    if request.param != "sqlite":
        overrides["database_url"] = request.getfixturevalue("postgres_url")
    if request.param == "postgres+redis":
        overrides["redis_url"] = request.getfixturevalue("redis_server")
    settings = service_settings(tmp_path, upstream_server[1], **overrides)
    with turnkeeper.open(settings=settings) as tk:
        session = tk.create_session(key="deep", project="alpha")
        tk.append(session, "user", "the poisoned message")
        tk.append(session, "assistant", "", tool_calls=[_call()])
        tk.append(session, "tool", "42", tool_call_id="c1")
    _poison(settings.database_url, session.id)
    for running in start_service(settings):
        yield Poisoned(running, settings.database_url, session.id)


def _assert_cut(session_metadata: Any, message_metadata: Any, tool_calls: Any = None) -> None:
    assert chain(session_metadata) == (MAX_JSON_DEPTH, CUT)
    assert chain(message_metadata) == (MAX_JSON_DEPTH, CUT)
    if tool_calls is not None:
        assert tool_calls[0]["id"] == "c1" and CUT in json.dumps(tool_calls)


def test_a_value_stored_too_deep_is_read_cut_off_by_the_library(poisoned: Poisoned) -> None:
    with turnkeeper.open(poisoned.database_url) as tk:
        session = tk.get_session(poisoned.session_id)
        messages = tk.history(session)
        _assert_cut(session.metadata, messages[0].metadata, messages[1].tool_calls)
        listed = tk.list_sessions(project="alpha").items
        assert chain(listed[0].metadata) == (MAX_JSON_DEPTH, CUT)
        window = tk.context(session, budget_tokens=1000)
        assert window.messages[0].content == "the poisoned message"


def test_a_value_stored_too_deep_is_read_cut_off_over_http(poisoned: Poisoned) -> None:
    service = poisoned.service
    with service.client("a") as http:
        messages = http.get("/v1/sessions/deep/messages")
        assert messages.status_code == 200, messages.text[:300]
        items = messages.json()["items"]
        session = http.get("/v1/sessions/deep")
        assert session.status_code == 200, session.text[:300]
        _assert_cut(session.json()["metadata"], items[0]["metadata"], items[1]["tool_calls"])
        listed = http.get("/v1/sessions")
        assert listed.status_code == 200, listed.text[:300]
        assert chain(listed.json()["items"][0]["metadata"]) == (MAX_JSON_DEPTH, CUT)
        assert http.get("/v1/sessions/deep/context").status_code == 200
    with service.client("admin") as admin:  # an admin listing every project
        everything = admin.get("/v1/sessions")
        assert everything.status_code == 200, everything.text[:300]
        assert [s["key"] for s in everything.json()["items"]] == ["deep"]


def test_a_value_stored_too_deep_is_read_cut_off_by_the_ui(poisoned: Poisoned) -> None:
    cookies = {"turnkeeper_key": poisoned.service.keys["a"]}
    with httpx.Client(base_url=poisoned.service.url, cookies=cookies, timeout=30) as ui:
        page = ui.get("/sessions/deep")
        assert page.status_code == 200, page.text[:300]
        assert "the poisoned message" in page.text
        assert ui.get("/").status_code == 200


def test_a_value_stored_too_deep_is_read_cut_off_over_mcp(poisoned: Poisoned) -> None:
    service = poisoned.service

    async def read() -> tuple[dict[str, Any], dict[str, Any]]:
        async with over_http(service.url, service.keys["a"]) as mcp:
            history = document(await mcp.call_tool("get_history", {"session": "deep"}))
            listed = document(await mcp.call_tool("list_sessions", {}))
            return history, listed

    history, listed = run_async(read())
    messages = history["messages"]
    _assert_cut(
        listed["sessions"][0]["metadata"], messages[0]["metadata"], messages[1]["tool_calls"]
    )


def test_a_value_stored_too_deep_is_read_cut_off_by_the_cli(poisoned: Poisoned) -> None:
    db = poisoned.database_url
    shown = run_cli("history", poisoned.session_id, "--json", "--db", db)
    assert shown.returncode == 0, shown.stderr.decode()
    listed = run_cli("sessions", "list", "--json", "--db", db)
    assert listed.returncode == 0, listed.stderr.decode()
    messages = json.loads(shown.stdout)["messages"]
    session = json.loads(listed.stdout)["sessions"][0]
    _assert_cut(session["metadata"], messages[0]["metadata"], messages[1]["tool_calls"])
    exported = run_cli("export", "-o", "-", "--db", db)
    assert exported.returncode == 0, exported.stderr.decode()
    records = [json.loads(line) for line in exported.stdout.decode().splitlines()]
    _assert_cut(records[0]["metadata"], records[1]["metadata"], records[2]["tool_calls"])
