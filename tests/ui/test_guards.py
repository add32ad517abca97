"""What the UI refuses, checked over plain HTTP (no browser needed)."""

from __future__ import annotations

import httpx

from tests.server.conftest import Service
from turnkeeper.server.ui.auth import COOKIE


def test_an_action_sent_from_another_site_is_refused(ui: Service) -> None:
    session = ui.tk.create_session(key="keep-me", project="alpha")
    ui.tk.append(session, "user", "still here")
    cookies = {COOKIE: ui.keys["admin"]}
    with httpx.Client(base_url=ui.url, cookies=cookies) as browser:
        response = browser.post(
            f"/sessions/{session.id}/delete", headers={"Origin": "https://evil.example"}
        )
        assert response.status_code == 403
        response = browser.post(
            f"/sessions/{session.id}/reset", headers={"Sec-Fetch-Site": "cross-site"}
        )
        assert response.status_code == 403
    assert ui.tk.get_session(session.id).message_count == 1


def test_pages_forbid_inline_script_and_framing(ui: Service) -> None:
    with httpx.Client(base_url=ui.url, cookies={COOKIE: ui.keys["a"]}) as browser:
        response = browser.get("/", headers={"Accept": "text/html"})
    assert response.status_code == 200
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy


def test_without_a_key_a_page_redirects_to_the_login_form(ui: Service) -> None:
    with httpx.Client(base_url=ui.url) as browser:
        response = browser.get("/", headers={"Accept": "text/html"})
        assert response.status_code == 303 and response.headers["location"] == "/login"
        assert browser.get("/sessions/x/messages").status_code == 401  # a script's poll


def test_ui_routes_stay_out_of_the_api_schema(ui: Service) -> None:
    with httpx.Client(base_url=ui.url, timeout=30) as client:  # the schema is built on first ask
        paths = client.get("/openapi.json").json()["paths"]
    assert not [
        path for path in paths if not path.startswith(("/v1", "/api", "/healthz", "/readyz"))
    ]
