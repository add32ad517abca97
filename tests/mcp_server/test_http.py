"""`/mcp` in a real `turnkeeper serve` on loopback, driven by the MCP SDK's streamable HTTP
client: the same tools, behind the same API keys and project scoping as the REST routes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import MCPError

import turnkeeper
from tests.conftest import run_async
from tests.hostile.served import Served, serve
from tests.mcp_server.clients import document, error_of, mcp_error_in, over_http
from turnkeeper.apikeys import ApiKeys


@dataclass
class Service:
    served: Served
    keys: dict[str, str]  # alpha's, beta's
    beta_session: str  # the id of a session of project beta, holding a private message


def _start(db: str, tmp_path: Path) -> Iterator[Service]:
    """`turnkeeper serve` on `db`, which holds beta's private note and a key per project (made
    here, in this process: a `turnkeeper keys create` subprocess each cost a second of CPU)."""
    with turnkeeper.open(db) as tk:
        secret = tk.create_session(key="secret", project="beta")
        tk.append(secret, "user", "beta's private note")
        api_keys = ApiKeys(tk.store)
        keys = {project: api_keys.create(project)[1] for project in ("alpha", "beta")}
    with serve(db, tmp_path / "serve.log") as served:
        yield Service(served, keys, secret.id)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One `turnkeeper serve` for every test here that only needs one running (a server per
    test cost three seconds of CPU in start-up each). The tests stay independent in any order:
    only `test_a_project_key_uses_the_tools_over_http` stores anything (alpha's "plan"), the
    others read beta's note, which nothing changes, or are refused before any data."""
    tmp = tmp_path_factory.mktemp("mcp-http")
    yield from _start(f"sqlite:///{tmp / 'served.db'}", tmp)


def _conversation(url: str, key: str) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        async with over_http(url, key) as mcp:
            opened = document(await mcp.call_tool("get_or_create_session", {"key": "plan"}))
            for content in ("We need a login page.", "Form first, then the API."):
                document(
                    await mcp.call_tool("append_message", {"session": "plan", "content": content})
                )
            window = document(
                await mcp.call_tool("get_context", {"session": "plan", "budget_tokens": 500})
            )
            listed = document(await mcp.call_tool("list_sessions", {}))
            return {"opened": opened, "window": window, "listed": listed}

    return run_async(run())


def test_a_project_key_uses_the_tools_over_http(service: Service) -> None:
    got = _conversation(service.served.url, service.keys["alpha"])
    assert got["opened"]["session"]["project"] == "alpha"
    assert [m["content"] for m in got["window"]["messages"]] == [
        "We need a login page.", "Form first, then the API.",
    ]  # fmt: skip
    assert got["window"]["report"]["budget"] == 500
    assert [s["key"] for s in got["listed"]["sessions"]] == ["plan"]  # beta's is not listed
    with service.served.client() as admin:  # the REST API sees what MCP stored
        stored = admin.get("/v1/sessions/plan/messages", params={"project": "alpha"})
        assert [m["content"] for m in stored.json()["items"]] == [
            "We need a login page.", "Form first, then the API.",
        ]  # fmt: skip


def test_a_body_over_the_services_limit_is_refused_at_mcp_too(service: Service) -> None:
    too_big = httpx.post(
        f"{service.served.url}/mcp",
        content=b"[" + b" " * (8 * 1024 * 1024) + b"]",  # the default limit is 8 MiB
        headers={
            "Authorization": f"Bearer {service.keys['alpha']}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
        timeout=60,
    )
    assert too_big.status_code == 413
    assert "larger than the limit" in too_big.json()["detail"]


def test_another_projects_session_is_not_found_over_mcp(service: Service) -> None:
    theirs = service.beta_session

    async def attempts() -> dict[str, Any]:
        async with over_http(service.served.url, service.keys["alpha"]) as mcp:
            context = error_of(await mcp.call_tool("get_context", {"session": theirs}))
            history = error_of(await mcp.call_tool("get_history", {"session": theirs}))
            append = error_of(
                await mcp.call_tool("append_message", {"session": theirs, "content": "hi"})
            )
            by_key = error_of(await mcp.call_tool("get_session_stats", {"session": "secret"}))
            listing = error_of(await mcp.call_tool("list_sessions", {"project": "beta"}))
            with pytest.raises(MCPError) as resource:
                await mcp.read_resource(f"turnkeeper://sessions/{theirs}/transcript")
            return {
                "context": context, "history": history, "append": append, "by_key": by_key,
                "listing": listing, "resource": str(resource.value),
            }  # fmt: skip

    got = run_async(attempts())
    not_found = f"session {theirs!r} not found in project 'alpha'"
    assert got["context"] == got["history"] == got["append"] == not_found
    assert got["resource"] == not_found
    assert got["by_key"] == "session 'secret' not found in project 'alpha'"
    assert got["listing"] == "this API key belongs to project 'alpha'"
    for answer in got.values():
        assert "private note" not in answer
    with turnkeeper.open(_db_of(service)) as tk:  # and nothing of theirs changed
        assert [m.content for m in tk.history(theirs)] == ["beta's private note"]


def _db_of(service: Service) -> str:
    args = service.served.process.args
    assert isinstance(args, list)
    return str(args[args.index("--db") + 1])


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (None, "this request needs an API key: Authorization: Bearer tk_<id>_<secret>"),
        ("tk_nothing_wrong", "invalid API key"),
    ],
)
def test_without_a_valid_key_mcp_is_refused(
    service: Service, key: str | None, message: str
) -> None:
    async def connect() -> None:
        async with over_http(service.served.url, key):
            pass

    with pytest.raises(BaseException) as raised:
        run_async(connect())
    refused = mcp_error_in(raised.value)
    assert refused is not None, raised.value
    assert str(refused) == message
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    raw = httpx.post(
        f"{service.served.url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={**headers, "Accept": "application/json, text/event-stream"},
    )
    assert raw.status_code == 401
    assert raw.headers["www-authenticate"].startswith("Bearer")
    assert raw.json()["error"]["message"] == message


def test_the_tools_work_on_postgresql(postgres_url: str, tmp_path: Path) -> None:
    for service in _start(postgres_url, tmp_path):
        got = _conversation(service.served.url, service.keys["alpha"])
        assert got["window"]["report"]["messages_included"] == 2
        assert [s["key"] for s in got["listed"]["sessions"]] == ["plan"]


def test_without_keys_mcp_answers_loopback_names_only(tmp_path: Path) -> None:
    """`--no-auth` (loopback only): the local admin needs no key, and a page that reaches the
    port through DNS rebinding (another Host, or another Origin) is refused."""
    db = f"sqlite:///{tmp_path / 'open.db'}"
    with turnkeeper.open(db) as tk:
        tk.create_session(key="secret", project="beta")
    with serve(db, tmp_path / "serve.log", "--no-auth") as served:

        async def listed() -> dict[str, Any]:
            async with over_http(served.url, None) as mcp:
                return document(await mcp.call_tool("list_sessions", {}))

        assert [s["key"] for s in run_async(listed())["sessions"]] == ["secret"]
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        accept = {"Accept": "application/json, text/event-stream"}
        rebound_host = httpx.post(
            f"{served.url}/mcp", json=request, headers={**accept, "Host": "attacker.example"}
        )
        rebound_origin = httpx.post(
            f"{served.url}/mcp",
            json=request,
            headers={**accept, "Origin": "http://attacker.example"},
        )
    assert rebound_host.status_code == 421
    assert rebound_origin.status_code == 403


LAZY_LOAD = """
import sys
from concurrent.futures import ThreadPoolExecutor
from fastapi.testclient import TestClient
from turnkeeper.config import load_settings
from turnkeeper.server.app import create_app

def sdk_loaded():
    return any(name == "mcp" or name.startswith("mcp.") for name in sys.modules)

app = create_app(load_settings(database_url=sys.argv[1], auth=False))
request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
accept = {"Accept": "application/json, text/event-stream"}
with TestClient(app, base_url="http://127.0.0.1:8000") as client:
    assert client.get("/v1/sessions").status_code == 200
    print("after REST:", sdk_loaded())
    with ThreadPoolExecutor(4) as pool:  # the first requests arrive together
        answers = list(pool.map(lambda _: client.post("/mcp", json=request, headers=accept),
                                range(4)))
    print("statuses:", sorted({int(answer.status_code) for answer in answers}))
    print("tools:", "append_message" in {t["name"] for t in answers[0].json()["result"]["tools"]})
    print("after /mcp:", sdk_loaded())
"""


def test_the_sdk_is_loaded_at_the_first_mcp_request(tmp_path: Path) -> None:
    """A service whose clients never ask for `/mcp` does not carry the SDK; the first requests
    (several at once) load it and are answered."""
    db = f"sqlite:///{tmp_path / 'lazy.db'}"
    ran = subprocess.run(
        [sys.executable, "-c", LAZY_LOAD, db], capture_output=True, text=True, check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        "after REST: False",
        "statuses: [200]",
        "tools: True",
        "after /mcp: True",
    ]


def test_a_request_id_that_is_not_a_string_or_an_integer_is_a_400(service: Service) -> None:
    """The SDK took such a message for a notification (202, and never an answer): the client is
    told instead, in JSON-RPC's words. A string or an integer id is answered under it."""
    for request_id in ({"a": 1}, [1], 1.5, True, None):
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}
        answer = _post_message(service, message)
        assert answer.status_code == 400, request_id
        assert answer.json() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32600,
                "message": "Invalid Request: id must be a string or an integer",
            },
        }
    for request_id in (7, "req-7"):
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}
        answer = _post_message(service, message)
        assert answer.status_code == 200, answer.text
        assert answer.json()["id"] == request_id and answer.json()["result"]["tools"]


def _post_message(service: Service, message: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{service.served.url}/mcp",
        json=message,
        headers={
            "Authorization": f"Bearer {service.keys['alpha']}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-06-18",
        },
        timeout=30,
    )
