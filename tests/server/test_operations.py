"""Probes, metrics, request ids, logs, and the 503 a lost database gets (and the recovery)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import turnkeeper
from turnkeeper.errors import BackendUnavailable

from .conftest import Service, service_settings, start_service
from .live import LiveServer
from .upstream import Upstream


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus' text format (0 when absent)."""
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = re.escape(name) + (r"\{" + re.escape(wanted) + r"\}" if labels else "") + r" (\S+)"
    found = re.search(r"^" + pattern + "$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_healthz_and_readyz_answer_without_a_key(service: Service) -> None:
    assert httpx.get(f"{service.url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{service.url}/readyz").json() == {"status": "ready"}


def test_the_request_id_is_echoed_or_made(client: httpx.Client) -> None:
    given = client.get("/v1/sessions", headers={"X-Request-ID": "req-123"})
    assert given.headers["x-request-id"] == "req-123"
    made = client.get("/v1/sessions/none")
    assert made.headers["x-request-id"] == made.json()["request_id"]
    odd = client.get("/v1/sessions", headers={"X-Request-ID": "no spaces allowed"})
    assert odd.headers["x-request-id"] != "no spaces allowed"


def test_metrics_count_requests_writes_builds_and_upstream_calls(
    service: Service, client: httpx.Client, upstream: Upstream
) -> None:
    before = httpx.get(f"{service.url}/metrics").text
    client.post("/v1/sessions", json={"key": "metered"})
    client.post(
        "/v1/sessions/metered/messages", json={"role": "user", "content": "hello", "id": "x"}
    )
    client.post(
        "/v1/sessions/metered/messages", json={"role": "user", "content": "hello", "id": "x"}
    )
    client.get("/v1/sessions/metered/context", params={"budget_tokens": 5000})
    client.post("/v1/sessions/metered/chat", json={"content": "hi"})
    upstream.mode = "error"
    client.post("/v1/sessions/metered/chat", json={"content": "again"})
    after = httpx.get(f"{service.url}/metrics").text

    def grew(name: str, **labels: str) -> float:
        return metric(after, name, **labels) - metric(before, name, **labels)

    route = {"method": "POST", "route": "/v1/sessions", "status": "201"}
    assert grew("turnkeeper_http_requests_total", **route) == 1
    assert (
        grew(
            "turnkeeper_http_request_duration_seconds_count",
            method="GET",
            route="/v1/sessions/{session}/context",
        )
        == 1
    )
    assert grew("turnkeeper_sessions_created_total") == 1
    assert grew("turnkeeper_messages_appended_total", role="user") == 3  # the retry is not new
    assert grew("turnkeeper_messages_appended_total", role="assistant") == 1
    assert grew("turnkeeper_tokens_stored_total") > 0
    assert grew("turnkeeper_context_builds_total", strategy="sliding_window") == 3
    assert grew("turnkeeper_upstream_duration_seconds_count", outcome="ok") == 1
    assert grew("turnkeeper_upstream_errors_total", kind="status_500") == 3  # 1 + 2 retries


class FlakyStore:
    """A real store that can be made unreachable: every call raises `BackendUnavailable`
    while `down`, as a backend's driver errors are mapped when its server is gone."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.down = False
        self.url = inner.url

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise BackendUnavailable("database unreachable: connection refused")
            return method(*args, **kwargs)

        return call


@pytest.fixture
def flaky(
    tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> Iterator[tuple[FlakyStore, str]]:
    settings = service_settings(tmp_path, upstream_server[1], auth=False)
    from turnkeeper.assemble import open_store
    from turnkeeper.server import create_app

    store = FlakyStore(open_store(settings.database_url, settings))
    tk = turnkeeper.Turnkeeper(store, settings)  # type: ignore[arg-type]
    with LiveServer(create_app(settings, tk)) as live:
        yield store, live.url
    tk.close()


def test_a_lost_database_is_a_503_and_the_service_recovers_by_itself(
    flaky: tuple[FlakyStore, str],
) -> None:
    store, url = flaky
    with httpx.Client(base_url=url) as http:
        http.post("/v1/sessions", json={"key": "k"})
        store.down = True
        ready, read = http.get("/readyz"), http.get("/v1/sessions/k")
        assert (ready.status_code, read.status_code) == (503, 503)
        assert read.headers["retry-after"] == "1"
        assert read.headers["content-type"] == "application/problem+json"
        assert "Traceback" not in read.text
        assert http.get("/healthz").status_code == 200
        store.down = False
        assert http.get("/readyz").status_code == 200
        assert http.get("/v1/sessions/k").status_code == 200


def test_a_bug_is_a_500_problem_without_the_traceback(service: Service) -> None:
    from turnkeeper.server.deps import get_turns

    def broken() -> None:
        raise RuntimeError("internal detail that must not leak")

    service.app.dependency_overrides[get_turns] = broken
    try:
        with service.client("a") as http:
            response = http.post("/v1/sessions/x/chat", json={"content": "hi"})
    finally:
        service.app.dependency_overrides.clear()
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    assert "internal detail" not in response.text and "Traceback" not in response.text


def test_no_auth_serves_everything_as_admin(
    tmp_path: Path, upstream_server: tuple[Upstream, str]
) -> None:
    for service in start_service(service_settings(tmp_path, upstream_server[1], auth=False)):
        with service.client(None) as anonymous:
            assert anonymous.post("/v1/sessions", json={"project": "any"}).status_code == 201


def test_the_openapi_schema_documents_every_route_with_examples(service: Service) -> None:
    schema = httpx.get(f"{service.url}/openapi.json").json()
    paths = set(schema["paths"])
    assert {
        "/v1/sessions", "/v1/sessions/{session}", "/v1/sessions/{session}/messages",
        "/v1/sessions/{session}/messages/batch", "/v1/sessions/{session}/context",
        "/v1/sessions/{session}/stats", "/v1/stats", "/v1/sessions/{session}/chat",
        "/v1/chat/completions", "/v1/models", "/v1/models/{model}", "/v1/conversations",
        "/v1/conversations/{conversation_id}", "/v1/conversations/{conversation_id}/items",
        "/v1/conversations/{conversation_id}/items/{item_id}", "/healthz", "/readyz",
    } <= paths  # fmt: skip
    assert not any(path.startswith("/api/") for path in paths)  # the older routes are gone
    assert schema["components"]["schemas"]["SessionCreate"]["examples"]
    assert "Problem" in schema["components"]["schemas"]
