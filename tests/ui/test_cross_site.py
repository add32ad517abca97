"""Another site's page, opened in a real browser, posting a plain form to the service (no
preflight, no script needed to send it): the service refuses it, with keys on or off."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from tests.server.conftest import Service
from tests.server.live import LiveServer

from .conftest import open_context


def _attacker_page(request: Request) -> HTMLResponse:
    """A page that posts a form to the address in its query as soon as it loads."""
    target = request.query_params["target"]
    return HTMLResponse(
        f'<body onload="document.forms[0].submit()">'
        f'<form method="post" action="{target}"><input name="x" value="1"></form></body>'
    )


@pytest.fixture(scope="module")
def attacker() -> Iterator[str]:
    """Another site: served on `localhost` (the service is on 127.0.0.1, another site)."""
    with LiveServer(Starlette(routes=[Route("/", _attacker_page)])) as live:
        yield live.url.replace("127.0.0.1", "localhost")


@pytest.mark.parametrize("path", ["/v1/sessions/{id}/archive", "/sessions/{id}/archive"])
def test_a_form_on_another_sites_page_cannot_archive_a_session_without_keys(
    browser: Browser, ui_without_keys: Service, attacker: str, path: str
) -> None:
    session = ui_without_keys.tk.create_session(key="keep-me")
    page = browser.new_page()
    target = ui_without_keys.url + path.format(id=session.id)
    with page.expect_response(target) as answered:
        page.goto(f"{attacker}/?target={target}")
    response = answered.value
    assert response.status == 403
    assert response.json()["errors"][0]["field"] == "Sec-Fetch-Site"
    assert ui_without_keys.tk.get_session(session.id).status == "active"
    page.close()


def test_a_form_on_another_sites_page_cannot_delete_with_the_ui_cookie(
    browser: Browser, ui: Service, attacker: str
) -> None:
    session = ui.tk.create_session(key="keep-me", project="alpha")
    context = open_context(browser, ui, "admin")  # logged in to the UI
    page = context.new_page()
    target = f"{ui.url}/sessions/{session.id}/delete"
    with page.expect_response(target) as answered:
        page.goto(f"{attacker}/?target={target}")
    assert answered.value.status == 403
    assert ui.tk.get_session(session.id).status == "active"
    context.close()
