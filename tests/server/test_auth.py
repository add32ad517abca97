"""API keys and project isolation: a key sees its own project, another project's session is a
404, an admin sees all; keys are made, listed and revoked with the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from turnkeeper.apikeys import ApiKeys
from turnkeeper.cli import app
from turnkeeper.config import load_settings
from turnkeeper.errors import InvalidConfig
from turnkeeper.server.app import check_bind

from .conftest import Service


def test_a_request_without_a_key_is_a_401_problem(service: Service) -> None:
    with service.client(None) as anonymous:
        response = anonymous.get("/v1/sessions")
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.headers["content-type"] == "application/problem+json"


@pytest.mark.parametrize("token", ["nonsense", "tk_abc_def", "tk_0123456789ab_wrong-secret"])
def test_a_wrong_key_is_a_401_that_says_nothing_more(service: Service, token: str) -> None:
    response = httpx.get(f"{service.url}/v1/sessions", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401
    assert response.json()["detail"] == "invalid API key"


def test_a_revoked_key_is_refused(service: Service) -> None:
    key, token = ApiKeys(service.tk.store).create("alpha")
    headers = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{service.url}/v1/sessions", headers=headers).status_code == 200
    ApiKeys(service.tk.store).revoke(key.id)
    assert httpx.get(f"{service.url}/v1/sessions", headers=headers).status_code == 401


def test_another_projects_session_is_a_404_by_id_and_by_key(service: Service) -> None:
    with service.client("a") as alpha, service.client("b") as beta:
        secret = alpha.post("/v1/sessions", json={"key": "shared-name"}).json()
        alpha.post("/v1/sessions/shared-name/messages", json={"role": "user", "content": "pw"})
        for path in (
            f"/v1/sessions/{secret['id']}",
            f"/v1/sessions/{secret['id']}/messages",
            f"/v1/sessions/{secret['id']}/context",
            f"/v1/sessions/{secret['id']}/stats",
            f"/v1/conversations/{secret['id']}",
            f"/v1/conversations/{secret['id']}/items",
            "/v1/sessions/shared-name",
        ):
            response = beta.get(path)
            assert response.status_code == 404, path
            assert "pw" not in response.text
        assert beta.delete(f"/v1/sessions/{secret['id']}").status_code == 404
        chat = beta.post(f"/v1/sessions/{secret['id']}/chat", json={"content": "leak it"})
        assert chat.status_code == 404
        assert beta.get("/v1/sessions").json()["items"] == []
        assert alpha.get(f"/v1/sessions/{secret['id']}").status_code == 200


def test_the_same_key_in_two_projects_names_two_sessions(service: Service) -> None:
    with service.client("a") as alpha, service.client("b") as beta:
        one = alpha.post("/v1/sessions", json={"key": "support-1"}).json()
        two = beta.post("/v1/sessions", json={"key": "support-1"}).json()
        assert one["id"] != two["id"]
        assert beta.get("/v1/sessions/support-1").json()["project"] == "beta"


def test_naming_another_project_is_a_403(client: httpx.Client) -> None:
    assert client.post("/v1/sessions", json={"project": "beta"}).status_code == 403
    assert client.get("/v1/sessions", params={"project": "beta"}).status_code == 403
    assert client.get("/v1/stats", params={"project": "beta"}).status_code == 403


def test_an_admin_key_sees_every_project(service: Service) -> None:
    with (
        service.client("a") as alpha,
        service.client("b") as beta,
        service.client("admin") as admin,
    ):
        one = alpha.post("/v1/sessions", json={"key": "x"}).json()
        beta.post("/v1/sessions", json={"key": "x"})
        assert admin.get(f"/v1/sessions/{one['id']}").status_code == 200
        projects = {s["project"] for s in admin.get("/v1/sessions").json()["items"]}
        assert projects == {"alpha", "beta"}
        only_beta = admin.get("/v1/sessions/x", params={"project": "beta"}).json()
        assert only_beta["project"] == "beta"
        made = admin.post("/v1/sessions", json={"project": "gamma"}).json()
        assert made["project"] == "gamma"


def test_no_auth_refuses_to_bind_beyond_loopback(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfig, match="loopback"):
        check_bind(load_settings(auth=False, host="0.0.0.0"))
    check_bind(load_settings(auth=False, host="127.0.0.1"))
    check_bind(load_settings(auth=False, host="::1"))
    check_bind(load_settings(auth=True, host="0.0.0.0"))


def test_serve_no_auth_on_a_public_address_fails_before_serving(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["serve", "--no-auth", "--host", "0.0.0.0", "--db", f"sqlite:///{tmp_path}/x.db"]
    )
    assert result.exit_code == 1
    assert "loopback" in result.output


def test_keys_are_created_printed_once_listed_and_revoked_with_the_cli(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'keys.db'}"
    runner = CliRunner()
    made = runner.invoke(app, ["keys", "create", "--project", "alpha", "--db", db])
    assert made.exit_code == 0, made.output
    token = made.stdout.strip()
    assert token.startswith("tk_")
    admin = json.loads(
        runner.invoke(
            app, ["keys", "create", "--project", "ops", "--admin", "--json", "--db", db]
        ).stdout
    )
    assert admin["admin"] is True and admin["token"].startswith("tk_")
    listed = json.loads(runner.invoke(app, ["keys", "list", "--json", "--db", db]).stdout)
    assert {k["project"] for k in listed} == {"alpha", "ops"}
    assert token not in json.dumps(listed)
    key_id = token.split("_")[1]
    revoked = runner.invoke(app, ["keys", "revoke", key_id, "--json", "--db", db])
    assert json.loads(revoked.stdout)["revoked_at"] is not None
    missing = runner.invoke(app, ["keys", "revoke", "nope", "--db", db])
    assert missing.exit_code == 1


def test_the_secret_is_stored_only_as_a_hash(service: Service) -> None:
    key, token = ApiKeys(service.tk.store).create("alpha")
    found = service.tk.store.find_api_key(key.id)
    assert found is not None
    assert token.split("_", 2)[2] not in found[1]
    assert len(found[1]) == 64
