"""An admin key reaches any session by its key: resolved across projects when one project
holds it, a 409 naming the projects when several do."""

from __future__ import annotations

import httpx
import openai

from .conftest import Service
from .upstream import Upstream


def test_an_admin_reaches_another_projects_session_by_key(
    service: Service, upstream: Upstream
) -> None:
    with service.client("b") as beta, service.client("admin") as admin:
        made = beta.post("/v1/sessions", json={"key": "trip-lisbon"}).json()
        found = admin.get("/v1/sessions/trip-lisbon")
        assert found.status_code == 200 and found.json()["id"] == made["id"]
        assert found.json()["project"] == "beta"
        added = admin.post(
            "/v1/sessions/trip-lisbon/messages", json={"role": "user", "content": "Hi"}
        )
        assert added.status_code == 201
        chat = admin.post("/v1/sessions/trip-lisbon/chat", json={"content": "Plan it"})
        assert chat.status_code == 200 and chat.json()["session"]["id"] == made["id"]
        assert beta.get("/v1/sessions/trip-lisbon").json()["message_count"] == 3


def test_a_key_held_in_two_projects_is_ambiguous_for_an_admin(service: Service) -> None:
    with service.client("a") as alpha, service.client("b") as beta:
        alpha.post("/v1/sessions", json={"key": "shared"})
        beta.post("/v1/sessions", json={"key": "shared"})
    with service.client("admin") as admin:
        response = admin.get("/v1/sessions/shared/messages")
        assert response.status_code == 409
        assert "ambiguous: in projects alpha, beta" in response.json()["detail"]
        assert admin.get("/v1/sessions/shared", params={"project": "beta"}).status_code == 200


def test_the_proxy_resolves_an_admins_session_key_too(service: Service, upstream: Upstream) -> None:
    with service.client("a") as alpha:
        alpha.post("/v1/sessions", json={"key": "agent-memory"})
        alpha.post(
            "/v1/sessions/agent-memory/messages", json={"role": "user", "content": "Earlier"}
        )
    with openai.OpenAI(
        base_url=f"{service.url}/v1", api_key=service.keys["admin"], max_retries=0
    ) as llm:
        llm.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "Now"}],
            extra_headers={"X-Turnkeeper-Session": "agent-memory"},
        )
    assert [m["content"] for m in upstream.requests[0]["messages"]] == ["Earlier", "Now"]


def test_an_unknown_key_is_still_a_404_for_an_admin(service: Service) -> None:
    with service.client("admin") as admin:
        response: httpx.Response = admin.get("/v1/sessions/nobody-has-this")
    assert response.status_code == 404


def test_an_admin_asking_in_the_wrong_project_is_told_where_the_session_is(
    service: Service,
) -> None:
    with service.client("b") as beta:
        made = beta.post("/v1/sessions", json={"key": "support-42"}).json()
    with service.client("admin") as admin:
        for ref in ("support-42", made["id"]):
            response = admin.get(f"/v1/sessions/{ref}/messages", params={"project": "alpha"})
            assert response.status_code == 404
            assert response.json()["detail"] == (
                f"session '{ref}' not found in project 'alpha'; it exists in project 'beta'; "
                "ask with project=beta"
            )
        assert admin.get("/v1/sessions/support-42", params={"project": "beta"}).status_code == 200


def test_a_project_key_learns_nothing_of_another_projects_sessions(service: Service) -> None:
    with service.client("b") as beta:
        made = beta.post("/v1/sessions", json={"key": "support-42"}).json()
    with service.client("a") as alpha:
        for ref in ("support-42", made["id"]):
            held = alpha.get(f"/v1/sessions/{ref}/messages")
            absent = alpha.get(f"/v1/sessions/{ref}-gone/messages")
            assert (held.status_code, absent.status_code) == (404, 404)
            assert held.json()["detail"] == f"session '{ref}' not found in project 'alpha'"
            assert "beta" not in held.text
