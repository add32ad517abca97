"""A session the service cannot decrypt, over HTTP on loopback, the CLI as a subprocess and MCP
over stdio: one clear answer in each interface's own error shape, never a 400 or a 500.

Two ways a session becomes unreadable (docs/privacy.md):

- its data key was destroyed (the session was deleted) while its rows are still there — a
  backup of the data restored after the delete. It is gone for good: HTTP 410.
- its data key is wrapped by a master key `encryption_key` no longer holds (dropped before
  `turnkeeper encryption rewrap` ran). The client cannot fix that, the operator can by setting
  the key again: HTTP 503 naming `encryption_key`, with no `Retry-After` (a retry in a second
  finds the same configuration) and `x-should-retry: false` for the SDKs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import turnkeeper
from tests.conftest import run_async
from tests.hostile.served import run_cli
from tests.mcp_server.clients import error_of, over_stdio
from turnkeeper.encryption.keys import generate_master_key
from turnkeeper.encryption.store import EncryptedStore

from .conftest import Service, service_settings, start_service
from .upstream import Upstream

OLD_KEY = generate_master_key("k1")
NEW_KEY = generate_master_key("k2")


def _unreadable_sessions(db: Path) -> dict[str, str]:
    """A database (to be served with `NEW_KEY` only) holding a readable session, one whose
    data key was destroyed while its rows remain — what a data backup restored after the
    delete holds, or a delete stopped between its two steps (the key goes first) — and one
    whose key is wrapped by `OLD_KEY`; their ids by key."""
    url = f"sqlite:///{db}"
    with turnkeeper.open(url, encryption_key=OLD_KEY) as tk:
        ids = {key: tk.create_session(key=key, project="alpha").id for key in ("gone", "old")}
        for key in ids:
            tk.append(ids[key], "user", f"the {key} one said something private")
        assert isinstance(tk.store, EncryptedStore)
        tk.store.keys.destroy([ids["gone"]])  # delete_session's first step
    with turnkeeper.open(url, encryption_key=f"{NEW_KEY},{OLD_KEY}") as tk:
        ids["fine"] = tk.create_session(key="fine", project="alpha").id
        tk.append(ids["fine"], "user", "readable")
    return ids


@pytest.fixture
def unreadable(
    tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> Iterator[tuple[Service, dict[str, str]]]:
    ids = _unreadable_sessions(tmp_path / "service.db")
    settings = service_settings(tmp_path, upstream_server[1], encryption_key=NEW_KEY)
    for running in start_service(settings):
        yield running, ids


def _problem(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == status and "Traceback" not in response.text
    detail: str = body["detail"]
    return detail


def test_a_shredded_session_is_gone_410_on_every_read_and_append(
    unreadable: tuple[Service, dict[str, str]],
) -> None:
    service, ids = unreadable
    with service.client("a") as http:
        assert http.get("/v1/sessions/fine/messages").status_code == 200
        for path in ("/v1/sessions/gone/messages", "/v1/sessions/gone/context"):
            detail = _problem(http.get(path), 410)
            assert f"session {ids['gone']} was deleted" in detail
            assert "service.db" not in detail  # no path of the deployment
        # An append would make a new key and leave the session half readable: refused too.
        sent = {"role": "user", "content": "a late message"}
        _problem(http.post("/v1/sessions/gone/messages", json=sent), 410)
        openai_shaped = http.get(f"/v1/conversations/{ids['gone']}/items")
    assert service.tk.get_session(ids["gone"]).last_seq == 1  # nothing stored
    assert isinstance(service.tk.store, EncryptedStore)
    assert service.tk.store.keys.store.find(ids["gone"]) is None  # no new key either
    assert openai_shaped.status_code == 410
    assert openai_shaped.headers["x-should-retry"] == "false"
    error = openai_shaped.json()["error"]
    assert error["code"] == "gone" and "was deleted" in error["message"]


def test_a_session_under_a_master_key_no_longer_configured_is_503_naming_encryption_key(
    unreadable: tuple[Service, dict[str, str]],
) -> None:
    service, ids = unreadable
    with service.client("a") as http:
        for path in ("/v1/sessions/old/messages", "/v1/sessions/old/context"):
            response = http.get(path)
            detail = _problem(response, 503)
            assert "master key 'k1'" in detail and "encryption_key" in detail
            assert "Retry-After" not in response.headers
            assert response.headers["x-should-retry"] == "false"
        openai_shaped = http.get(f"/v1/conversations/{ids['old']}/items")
    assert openai_shaped.status_code == 503
    assert openai_shaped.headers["x-should-retry"] == "false"
    assert "encryption_key" in openai_shaped.json()["error"]["message"]


def test_the_cli_and_mcp_say_it_in_one_line(tmp_path: Path) -> None:
    ids = _unreadable_sessions(tmp_path / "t.db")
    db = f"sqlite:///{tmp_path / 't.db'}"
    env = {"TURNKEEPER_ENCRYPTION_KEY": NEW_KEY}
    said = {}
    for name, says in (("gone", "was deleted"), ("old", "master key 'k1'")):
        result = run_cli("history", name, "--project", "alpha", "--db", db, env=env)
        stderr = result.stderr.decode()
        assert result.returncode == 1 and result.stdout == b""
        assert stderr.count("\n") == 1 and stderr.startswith("error: "), stderr
        assert says in stderr and "Traceback" not in stderr
        said[name] = stderr.removeprefix("error: ").strip()
    assert run_cli("history", "fine", "--project", "alpha", "--db", db, env=env).returncode == 0

    async def tool_errors() -> list[str]:
        async with over_stdio("--db", db, "--project", "alpha", env=env) as mcp:
            return [
                error_of(await mcp.call_tool("get_context", {"session": name}))
                for name in ("gone", "old")
            ]

    assert run_async(tool_errors()) == [said["gone"], said["old"]]
    assert ids["gone"] in said["gone"]
