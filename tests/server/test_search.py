"""`GET /v1/search` over a real server, on SQLite and on PostgreSQL behind the caches: each API
key finds its own project's messages only, and every bad parameter is a problem naming it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import Service, service_settings, start_service
from tests.server.upstream import Upstream


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
