"""What a web page in the user's browser can make the browser send to the service: a request
under another host name (DNS rebinding) and a state-changing request from another site (a
plain form POST needs no CORS preflight). Without keys (`--no-auth`, what `make run` serves)
only loopback names and `allowed_hosts` are served; with keys or without, a change another
site's page sent is refused. Real clients (httpx, the OpenAI SDK, the MCP SDK) on loopback
are served as before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import run_async
from tests.mcp_server.clients import document, over_http
from tests.server.conftest import service_settings, start_service
from tests.server.upstream import Upstream
from turnkeeper.server.ui.auth import COOKIE

from .conftest import Service, snapshot

MCP_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def _keyless(tmp: Path, upstream_url: str, **overrides: Any) -> Iterator[Service]:
    """A service without API keys (as `--no-auth` serves it) with a session `target` holding
    two messages."""
    for running in start_service(service_settings(tmp, upstream_url, auth=False, **overrides)):
        session = running.tk.create_session(key="target")
        running.tk.append(session, "user", "the secret plan")
        running.tk.append(session, "assistant", "noted")
        yield running


@pytest.fixture(scope="module")
def keyless(
    tmp_path_factory: pytest.TempPathFactory, upstream_server: tuple[Upstream, str]
) -> Iterator[Service]:
    yield from _keyless(tmp_path_factory.mktemp("keyless"), upstream_server[1])


def _port(service: Service) -> str:
    return service.url.rsplit(":", 1)[1]


# (method, path, body, extra headers): reads and writes over REST, the UI, search and MCP
REBOUND = [
    ("GET", "/v1/sessions", None, {}),
    ("GET", "/v1/sessions/target/messages", None, {}),
    ("GET", "/v1/search?q=secret", None, {}),
    ("GET", "/", None, {"Accept": "text/html"}),
    ("GET", "/sessions/target", None, {"Accept": "text/html"}),
    ("GET", "/search?q=secret", None, {"Accept": "text/html"}),
    ("POST", "/sessions/target/messages", b"role=user&content=pwned", FORM),
    ("POST", "/sessions/target/delete", b"", FORM),
    ("DELETE", "/v1/sessions/target", None, {}),
    ("POST", "/v1/sessions/target/archive", None, {}),
    ("POST", "/mcp", MCP_LIST, MCP_ACCEPT),
]


@pytest.mark.parametrize(
    "host", ["evil.example:{port}", "evil.example", "127.0.0.1.evil.example:{port}", ""]
)
@pytest.mark.parametrize(("method", "path", "body", "headers"), REBOUND, ids=lambda v: str(v))
def test_without_keys_a_request_for_another_host_is_refused_and_changes_nothing(
    keyless: Service,
    host: str,
    method: str,
    path: str,
    body: Any,
    headers: dict[str, str],
) -> None:
    """A page on evil.example whose name was pointed at 127.0.0.1 (DNS rebinding) is the same
    origin as itself, so its own script may read every answer; its requests name its host.
    The browser marks them same-origin, so only the Host header gives them away."""
    before = snapshot(keyless.tk)
    sent = {**headers, "Host": host.format(port=_port(keyless)), "Sec-Fetch-Site": "same-origin"}
    with httpx.Client(base_url=keyless.url, timeout=30) as http:
        content = body if isinstance(body, bytes) or body is None else None
        response = http.request(
            method, path, content=content, json=None if content is not None else body, headers=sent
        )
    assert response.status_code == 421, response.text[:300]
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == 421 and "Host header" in problem["detail"]
    assert problem["errors"][0]["field"] == "Host"
    assert "secret plan" not in response.text
    assert snapshot(keyless.tk) == before


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]", "LocalHost.", "ui.localhost"])
def test_without_keys_loopback_names_are_served(keyless: Service, host: str) -> None:
    with httpx.Client(base_url=keyless.url, timeout=30) as http:
        listed = http.get("/v1/sessions", headers={"Host": f"{host}:{_port(keyless)}"})
        page = http.get("/", headers={"Host": host, "Accept": "text/html"})
    assert listed.status_code == 200 and [s["key"] for s in listed.json()["items"]] == ["target"]
    assert page.status_code == 200 and "target" in page.text


def test_without_keys_a_configured_host_is_served_and_others_are_not(
    tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> None:
    for service in _keyless(tmp_path, upstream_server[1], allowed_hosts="memory.internal"):
        with httpx.Client(base_url=service.url, timeout=30) as http:
            named = http.get("/v1/sessions/target", headers={"Host": "memory.internal:80"})
            other = http.get("/v1/sessions/target", headers={"Host": "evil.example"})
        assert named.status_code == 200 and named.json()["key"] == "target"
        assert other.status_code == 421


def test_with_keys_any_host_is_served_until_allowed_hosts_is_set(
    hostile_service: Service, tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> None:
    """With keys, a rebound page has no key to send (and no cookie: it belongs to the real
    host name), so a service behind a proxy answers whatever name it is reached by; naming
    the hosts turns the check on."""
    with hostile_service.client("a") as http:
        assert http.get("/v1/sessions/target", headers={"Host": "tk.example"}).status_code == 200
    settings = service_settings(tmp_path, upstream_server[1], allowed_hosts=["tk.example"])
    for service in start_service(settings):
        with service.client("a") as http:
            assert http.get("/v1/sessions", headers={"Host": "tk.example"}).status_code == 200
            assert http.get("/v1/sessions", headers={"Host": "other.example"}).status_code == 421


# (header, value) that mark a request sent by another site's page
FOREIGN = [
    ("Origin", "https://evil.example"),
    ("Origin", "null"),  # a sandboxed frame or a file: never this service's own page
    ("Origin", "http://localhost:3000"),  # another server on this machine: another origin
    ("Sec-Fetch-Site", "cross-site"),
    ("Sec-Fetch-Site", "same-site"),  # a sibling subdomain: the SameSite cookie goes along
]

# (method, path, body, headers): what a page can send without a preflight, and the rest
CHANGES = [
    ("POST", "/v1/sessions/target/archive", None, {}),
    ("POST", "/v1/sessions/target/messages", b'{"role": "user", "content": "pwned"}',
     {"Content-Type": "text/plain"}),
    ("POST", "/v1/sessions", b"key=planted", FORM),
    ("DELETE", "/v1/sessions/target", None, {}),
    ("POST", "/sessions/target/delete", b"", FORM),
    ("POST", "/sessions/target/messages", b"role=user&content=pwned", FORM),
    ("POST", "/sessions/target/reset", b"", FORM),
    ("POST", "/mcp", MCP_LIST, MCP_ACCEPT),
]  # fmt: skip


@pytest.mark.parametrize(("header", "value"), FOREIGN)
@pytest.mark.parametrize(("method", "path", "body", "headers"), CHANGES, ids=lambda v: str(v))
def test_without_keys_a_change_sent_by_another_site_is_refused(
    keyless: Service,
    header: str,
    value: str,
    method: str,
    path: str,
    body: Any,
    headers: dict[str, str],
) -> None:
    before = snapshot(keyless.tk)
    response = _send(keyless.url, method, path, body, {**headers, header: value})
    _assert_refused_for(response, header)
    assert snapshot(keyless.tk) == before


def test_the_proxy_refuses_another_site_in_openais_error_shape(keyless: Service) -> None:
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    response = httpx.post(
        f"{keyless.url}/v1/chat/completions",
        json=request,
        headers={"Origin": "https://evil.example"},
        timeout=30,
    )
    assert response.status_code == 403
    assert "Origin" in response.json()["error"]["message"]


def test_the_messages_api_refuses_another_site_in_anthropics_error_shape(keyless: Service) -> None:
    before = snapshot(keyless.tk)
    request = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    response = httpx.post(
        f"{keyless.url}/v1/messages",
        json=request,
        headers={"Sec-Fetch-Site": "cross-site", "X-Turnkeeper-Session": "target"},
        timeout=30,
    )
    assert response.status_code == 403
    assert response.json()["type"] == "error"
    assert response.json()["error"]["type"] == "permission_error"
    assert "Sec-Fetch-Site" in response.json()["error"]["message"]
    assert snapshot(keyless.tk) == before


@pytest.mark.parametrize(("header", "value"), FOREIGN)
def test_with_keys_a_change_sent_by_another_site_is_refused_too(
    hostile_service: Service, header: str, value: str
) -> None:
    """With keys on, the UI's forms ride on a SameSite=Strict cookie, which a sibling
    subdomain's page still gets sent along; and a REST client never sends these headers."""
    before = snapshot(hostile_service.tk)
    key = hostile_service.keys["a"]
    ui = _send(
        hostile_service.url,
        "POST",
        "/sessions/target/delete",
        b"",
        {**FORM, header: value},
        cookies={COOKIE: key},
    )
    rest = _send(
        hostile_service.url,
        "POST",
        "/v1/sessions/target/archive",
        None,
        {"Authorization": f"Bearer {key}", header: value},
    )
    _assert_refused_for(ui, header)
    _assert_refused_for(rest, header)
    assert snapshot(hostile_service.tk) == before


def test_changes_from_the_services_own_pages_and_from_clients_are_served(
    tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> None:
    for service in _keyless(tmp_path, upstream_server[1]):
        own = service.url  # the Origin a page of this service sends
        with httpx.Client(base_url=service.url, timeout=30) as http:
            typed = http.post("/v1/sessions", json={"key": "typed"})  # no browser headers
            same = http.post(
                "/v1/sessions", json={"key": "same"}, headers={"Sec-Fetch-Site": "same-origin"}
            )
            origin = http.post("/v1/sessions", json={"key": "origin"}, headers={"Origin": own})
            target = service.tk.get_session("target").id
            form = http.post(
                f"/sessions/{target}/messages",
                content=b"role=user&content=by+hand",
                headers={**FORM, "Sec-Fetch-Site": "same-origin", "Origin": own},
            )
        assert [typed.status_code, same.status_code, origin.status_code] == [201, 201, 201]
        assert form.status_code == 303
        assert [m.content for m in service.tk.history(target)][-1] == "by hand"


def test_without_keys_the_openai_and_mcp_clients_work_on_loopback(
    keyless: Service, upstream_server: tuple[Upstream, str]
) -> None:
    with openai.OpenAI(base_url=f"{keyless.url}/v1", api_key="unused", max_retries=0) as llm:
        reply = llm.chat.completions.create(
            model="test-model", messages=[{"role": "user", "content": "hello"}]
        )
    assert reply.choices[0].message.content

    async def listed() -> dict[str, Any]:
        async with over_http(keyless.url, None) as mcp:
            return document(await mcp.call_tool("list_sessions", {}))

    assert "target" in [s["key"] for s in run_async(listed())["sessions"]]


def _send(
    url: str,
    method: str,
    path: str,
    body: Any,
    headers: dict[str, str],
    cookies: dict[str, str] | None = None,
) -> httpx.Response:
    with httpx.Client(base_url=url, timeout=30, cookies=cookies) as http:
        if isinstance(body, bytes) or body is None:
            return http.request(method, path, content=body, headers=headers)
        return http.request(method, path, json=body, headers=headers)


def _assert_refused_for(response: httpx.Response, header: str) -> None:
    assert response.status_code == 403, response.text[:300]
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == 403 and header in problem["detail"]
    assert problem["errors"][0]["field"] == header
