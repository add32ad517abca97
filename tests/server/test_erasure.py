"""Erasure and legal holds over HTTP, on a real server on loopback: the receipt, 410 for an
erased id wherever it is named, a project key erasing in its own project only, across
projects an admin's, and bad input answered 4xx in the problem shape naming the field."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from .conftest import Service


def _session(client: httpx.Client, subject: str, text: str, **params: str) -> str:
    created = client.post("/v1/sessions", json={"subject": subject}, params=params)
    assert created.status_code == 201, created.text
    session_id: str = created.json()["id"]
    added = client.post(
        f"/v1/sessions/{session_id}/messages",
        json={"role": "user", "content": text},
        params=params,
    )
    assert added.status_code == 201, added.text
    return session_id


def _problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    return body


def test_a_project_key_erases_its_subject_and_the_id_is_gone_with_410(service: Service) -> None:
    with service.client("a") as alpha, service.client("b") as beta:
        mine = _session(alpha, "patient-7", "alpha words")
        theirs = _session(beta, "patient-7", "beta words")
        receipt = alpha.post("/v1/erasures", json={"subject": "patient-7"})
        assert receipt.status_code == 200, receipt.text
        body = receipt.json()
        assert (body["sessions"], body["messages"], body["project"]) == ([mine], 1, "alpha")
        assert body["held"] == [] and body["dry_run"] is False
        for response in (
            alpha.get(f"/v1/sessions/{mine}"),
            alpha.get(f"/v1/sessions/{mine}/messages"),
            alpha.post(f"/v1/sessions/{mine}/messages", json={"role": "user", "content": "late"}),
        ):
            problem = _problem(response, 410)
            assert mine in problem["detail"] and "erased" in problem["detail"]
        # another project's key learns nothing: its erased id is a 404 there
        _problem(beta.get(f"/v1/sessions/{mine}"), 404)
        assert beta.get(f"/v1/sessions/{theirs}").status_code == 200
        # naming another project is refused, and nothing is erased
        _problem(alpha.post("/v1/erasures", json={"subject": "patient-7", "project": "beta"}), 403)
        assert beta.get(f"/v1/sessions/{theirs}/messages").status_code == 200


def test_only_an_admin_erases_a_subject_across_projects(service: Service) -> None:
    with service.client("a") as alpha, service.client("b") as beta:
        here = _session(alpha, "patient-9", "here")
        there = _session(beta, "patient-9", "there")
    with service.client("admin") as admin:
        receipt = admin.post("/v1/erasures", json={"subject": "patient-9", "dry_run": True})
        assert sorted(receipt.json()["sessions"]) == sorted([here, there])
        assert admin.get(f"/v1/sessions/{here}").status_code == 200  # a dry run
        done = admin.post("/v1/erasures", json={"subject": "patient-9"}).json()
        assert sorted(done["sessions"]) == sorted([here, there]) and done["project"] is None
        _problem(admin.get(f"/v1/sessions/{there}"), 410)


def test_legal_holds_keep_sessions_and_the_receipt_lists_them(service: Service) -> None:
    with service.client("a") as alpha:
        held = _session(alpha, "patient-3", "held")
        free = _session(alpha, "patient-3", "free")
        hold = alpha.put(f"/v1/sessions/{held}/legal-hold")
        assert hold.status_code == 200 and hold.json()["session_id"] == held
        assert [h["session_id"] for h in alpha.get("/v1/legal-holds").json()] == [held]
        body = alpha.post("/v1/erasures", json={"subject": "patient-3"}).json()
        assert (body["sessions"], body["held"]) == ([free], [held])
        assert alpha.get(f"/v1/sessions/{held}").status_code == 200
        assert alpha.delete(f"/v1/sessions/{held}/legal-hold").status_code == 204
        project_hold = alpha.put("/v1/projects/alpha/legal-hold")
        assert project_hold.status_code == 200 and project_hold.json()["session_id"] is None
        _problem(alpha.put("/v1/projects/beta/legal-hold"), 403)
        assert alpha.post("/v1/erasures", json={"session": held}).json()["held"] == [held]
        assert alpha.delete("/v1/projects/alpha/legal-hold").status_code == 204
        assert alpha.get("/v1/legal-holds").json() == []
        assert alpha.post("/v1/erasures", json={"session": held}).json()["sessions"] == [held]
        _problem(alpha.put(f"/v1/sessions/{held}/legal-hold"), 410)


def test_a_held_session_refuses_delete_and_reset_with_409(service: Service) -> None:
    with service.client("a") as alpha:
        held = _session(alpha, "patient-4", "held")
        assert alpha.put(f"/v1/sessions/{held}/legal-hold").status_code == 200
        for refused in (
            alpha.delete(f"/v1/sessions/{held}"),
            alpha.post(f"/v1/sessions/{held}/reset", json={}),
        ):
            assert "legal hold" in _problem(refused, 409)["detail"]
        assert alpha.get(f"/v1/sessions/{held}").json()["message_count"] == 1
        assert alpha.delete(f"/v1/sessions/{held}/legal-hold").status_code == 204
        assert alpha.delete(f"/v1/sessions/{held}").status_code == 204


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "subject"),
        ({"subject": ""}, "subject"),
        ({"subject": 7}, "subject"),
        ({"subject": ["patient-7"]}, "subject"),
        ({"subject": "x" * 256}, "subject"),
        ({"subject": "patient-7", "session": "s"}, "session"),
        ({"subject": "patient-7", "dry_run": "yes"}, "dry_run"),
        ({"project": "../up"}, "project"),
        ({"subject": "patient-7", "everything": True}, "everything"),
    ],
)
def test_bad_erasures_are_422_naming_the_field_and_erase_nothing(
    service: Service, body: dict[str, Any], field: str
) -> None:
    with service.client("a") as alpha:
        kept = _session(alpha, "patient-7", "kept")
        problem = _problem(alpha.post("/v1/erasures", json=body), 422)
        assert [error["field"] for error in problem["errors"]] == [field]
        assert alpha.get(f"/v1/sessions/{kept}/messages").status_code == 200


def test_unknown_sessions_and_missing_keys_are_refused(service: Service) -> None:
    with service.client("a") as alpha:
        _problem(alpha.post("/v1/erasures", json={"session": "no-such-session"}), 404)
        _problem(alpha.put("/v1/sessions/no-such-session/legal-hold"), 404)
    with service.client(None) as anonymous:
        _problem(anonymous.post("/v1/erasures", json={"subject": "patient-7"}), 401)


def test_the_openapi_schema_documents_the_routes(service: Service) -> None:
    with service.client("a") as alpha:
        paths = alpha.get("/openapi.json").json()["paths"]
    assert "requestBody" in paths["/v1/erasures"]["post"]
    assert {"422", "403", "404"} <= set(paths["/v1/erasures"]["post"]["responses"])
    assert {"put", "delete"} <= set(paths["/v1/sessions/{session}/legal-hold"])
    assert {"put", "delete"} <= set(paths["/v1/projects/{project}/legal-hold"])
    assert "get" in paths["/v1/legal-holds"]
