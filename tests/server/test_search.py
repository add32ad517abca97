"""`GET /v1/search` over a real server, on SQLite and on PostgreSQL behind the caches: each API
key finds its own project's messages only, and every bad parameter is a problem naming it. One
key runs at most `search_concurrency` searches at once, counted across the REST API, the UI and
MCP; a search past `search_timeout` is a problem asking for a narrower one."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from mcp.types import CallToolResult

from tests.conftest import run_async
from tests.mcp_server.clients import document, error_of, over_http
from tests.server.conftest import Service, service_settings, start_service
from tests.server.upstream import Upstream
from turnkeeper.server.ui.auth import COOKIE
from turnkeeper.types import NewMessage


@pytest.fixture(params=["sqlite", "postgres+caches"])
def searched(
    request: pytest.FixtureRequest, tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> Iterator[Service]:
    """A service whose projects alpha and beta each hold a session mentioning Lisbon."""
    overrides = {}
    if request.param != "sqlite":
        overrides = {
            "database_url": request.getfixturevalue("postgres_url"),
            "redis_url": request.getfixturevalue("redis_server"),
            "lru_size": 100,
        }
    for service in start_service(service_settings(tmp_path, upstream_server[1], **overrides)):
        with service.client("a") as alpha, service.client("b") as beta:
            alpha.post("/v1/sessions", json={"key": "trip", "title": "Trip"})
            for content in ("Flights to Lisbon on Friday", "Hotel near the Lisbon river"):
                message = {"role": "user", "content": content}
                assert alpha.post("/v1/sessions/trip/messages", json=message).is_success
            beta.post("/v1/sessions", json={"key": "trip"})
            secret = {"role": "user", "content": "Beta's Lisbon password is hunter2"}
            assert beta.post("/v1/sessions/trip/messages", json=secret).is_success
        yield service


def test_search_returns_ranked_hits_with_highlighted_snippets(searched: Service) -> None:
    with searched.client("a") as alpha:
        body = alpha.get("/v1/search", params={"q": "lisbon hotel"}).json()
    (hit,) = body["hits"]
    assert (hit["session_key"], hit["session_title"], hit["seq"]) == ("trip", "Trip", 2)
    assert {"text": "Hotel", "match": True} in hit["snippet"]
    assert "".join(p["text"] for p in hit["snippet"]) == "Hotel near the Lisbon river"
    assert (body["query"], body["limit"], body["offset"]) == ("lisbon hotel", 20, 0)


def test_each_key_finds_only_its_own_projects_messages(searched: Service) -> None:
    with searched.client("a") as alpha, searched.client("b") as beta:
        mine = alpha.get("/v1/search", params={"q": "lisbon"}).json()["hits"]
        assert sorted(h["seq"] for h in mine) == [1, 2]
        assert {h["project"] for h in mine} == {"alpha"}
        assert alpha.get("/v1/search", params={"q": "hunter2"}).json()["hits"] == []
        theirs = beta.get("/v1/search", params={"q": "lisbon"}).json()["hits"]
        assert [(h["project"], h["seq"]) for h in theirs] == [("beta", 1)]
        assert "Flights" not in beta.get("/v1/search", params={"q": "flights"}).text
        assert alpha.get("/v1/search", params={"q": "x", "project": "beta"}).status_code == 403
        session = beta.get("/v1/sessions/trip").json()["id"]
        other = alpha.get("/v1/search", params={"q": "lisbon", "session": session})
        assert other.status_code == 404 and "hunter2" not in other.text
    with searched.client("admin") as admin:
        everyone = admin.get("/v1/search", params={"q": "lisbon"}).json()["hits"]
        assert sorted(h["project"] for h in everyone) == ["alpha", "alpha", "beta"]
        only = admin.get("/v1/search", params={"q": "lisbon", "project": "beta"}).json()
        assert [h["project"] for h in only["hits"]] == ["beta"]


def test_filters_and_paging_apply(searched: Service) -> None:
    with searched.client("a") as alpha:

        def seqs(**params: object) -> list[int]:
            response = alpha.get("/v1/search", params={"q": "lisbon", **params})
            assert response.status_code == 200, response.text
            return [hit["seq"] for hit in response.json()["hits"]]

        assert sorted(seqs(session="trip", role="user")) == [1, 2]
        assert seqs(role="assistant") == []
        assert seqs(author="nobody") == []
        assert seqs(kind="other") == []
        assert seqs(until="2000-01-01T00:00:00Z") == []
        assert sorted(seqs(since="2000-01-01T00:00:00Z")) == [1, 2]
        assert len(seqs(limit=1)) == 1 and len(seqs(limit=1, offset=1)) == 1
        assert seqs(limit=1) != seqs(limit=1, offset=1)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "q"),
        ({"q": ""}, "q"),
        ({"q": '"unclosed'}, "q"),
        ({"q": "a OR"}, "q"),
        ({"q": "NEAR(a b) AND"}, None),  # backend syntax is plain words: a 200, not an error
        ({"q": "x" * 501}, "q"),
        ({"q": "a", "limit": 0}, "limit"),
        ({"q": "a", "limit": 101}, "limit"),
        ({"q": "a", "offset": -1}, "offset"),
        ({"q": "a", "role": "robot"}, "role"),
        ({"q": "a", "since": "yesterday"}, "since"),
        ({"q": "a", "since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "until"),
        ({"q": "a", "since": "2026-01-02T00:00:00"}, "since"),
    ],
)
def test_bad_parameters_are_problems_naming_them(
    client: httpx.Client, params: dict[str, object], field: str | None
) -> None:
    response = client.get("/v1/search", params=params)
    if field is None:
        assert response.status_code == 200
        return
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert field in [error["field"] for error in response.json()["errors"]]


# -- one key's searches, bounded -------------------------------------------------------------

PATIENCE = 60
"""Seconds the test waits for what must happen at once: it fails instead of hanging."""


@pytest.fixture
def one_search_per_key(tmp_path: Path, upstream_server: tuple[Upstream, str]) -> Iterator[Service]:
    """A service on SQLite whose keys may each run one search at a time, with messages in
    projects alpha and beta that no search has indexed yet."""
    settings = service_settings(tmp_path, upstream_server[1], search_concurrency=1)
    for service in start_service(settings):
        for who in ("a", "b"):
            with service.client(who) as http:
                http.post("/v1/sessions", json={"key": "trip"})
                message = {"role": "user", "content": "Flights to Lisbon on Friday"}
                assert http.post("/v1/sessions/trip/messages", json=message).is_success
        yield service


def _search_over_mcp(url: str, key: str) -> CallToolResult:
    async def call() -> CallToolResult:
        async with over_http(url, key) as mcp:
            return await mcp.call_tool("search_messages", {"query": "lisbon"})

    return run_async(call())


def test_a_key_runs_search_concurrency_searches_at_once_over_rest_ui_and_mcp(
    one_search_per_key: Service, tmp_path: Path
) -> None:
    """Three searches of one key at once, through the REST API, the UI and MCP, while the
    database keeps every search waiting (its first search indexes new messages, and another
    connection holds the write lock): one runs, the other two are refused at once (429 with
    `Retry-After`; a tool error over MCP). Another key's search is not refused. When the lock
    goes, the waiting searches answer."""
    service = one_search_per_key
    token = service.keys["a"]
    ui_headers = {"Accept": "text/html", "Cookie": f"{COOKIE}={token}"}

    def rest(who: str) -> httpx.Response:
        with service.client(who) as http:
            return http.get("/v1/search", params={"q": "lisbon"})

    def ui() -> httpx.Response:
        with httpx.Client(base_url=service.url, timeout=PATIENCE) as http:
            return http.get("/search", params={"q": "lisbon"}, headers=ui_headers)

    writer = sqlite3.connect(tmp_path / "service.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # a search must wait for it to index the new messages
    with ThreadPoolExecutor(4) as pool:
        of_a = {
            "rest": pool.submit(rest, "a"),
            "ui": pool.submit(ui),
            "mcp": pool.submit(_search_over_mcp, service.url, token),
        }
        of_b = pool.submit(rest, "b")
        deadline = time.monotonic() + PATIENCE
        while sum(future.done() for future in of_a.values()) < 2:  # the refused ones
            assert time.monotonic() < deadline, "two of the three searches must answer at once"
            time.sleep(0.01)
        refused_at_once = {name for name, future in of_a.items() if future.done()}
        writer.execute("ROLLBACK")
        writer.close()
        answers = {name: future.result() for name, future in of_a.items()}
        other_key = of_b.result()

    ran = set(of_a) - refused_at_once
    assert len(ran) == 1
    for name, answer in answers.items():
        if isinstance(answer, CallToolResult):
            if name in ran:
                assert [hit["seq"] for hit in document(answer)["hits"]] == [1]
            else:
                assert "at once" in error_of(answer)
            continue
        if name in ran:
            assert answer.status_code == 200, answer.text
            continue
        assert answer.status_code == 429, answer.text
        assert answer.headers["retry-after"] == "1"
        assert "already runs 1 searches at once" in answer.text
    assert other_key.status_code == 200
    assert [hit["project"] for hit in other_key.json()["hits"]] == ["beta"]
    assert rest("a").status_code == 200  # its turn is free again


def test_a_search_past_search_timeout_is_a_problem_naming_q(
    tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> None:
    settings = service_settings(tmp_path, upstream_server[1], search_timeout="1ms")
    for service in start_service(settings):
        session = service.tk.create_session(key="bulk", project="alpha")
        lines = [NewMessage(role="user", content=f"lisbon note {n}") for n in range(20_000)]
        service.tk.append_many(session, lines)
        with service.client("a") as alpha:
            response = alpha.get("/v1/search", params={"q": "lisbon"})
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    (error,) = response.json()["errors"]
    assert error["field"] == "q"
    assert "took longer than 1 ms" in error["problem"] and "narrow it" in error["problem"]
