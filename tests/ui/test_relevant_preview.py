"""The session page offers `relevant` and previews its window, over plain HTTP (no browser)."""

from __future__ import annotations

import html

import httpx

from tests.server.conftest import Service
from turnkeeper.server.ui.auth import COOKIE


def test_the_preview_shows_what_relevant_recalled(ui: Service) -> None:
    session = ui.tk.create_session(key="recall", project="alpha", title="Recall")
    ui.tk.append(session, "system", "Be brief.")
    ui.tk.append(session, "user", "My locker code is 4471.")
    for turn in range(12):
        ui.tk.append(session, "user", f"question {turn} " + "words " * 40)
        ui.tk.append(session, "assistant", f"answer {turn} " + "words " * 40)
    ui.tk.append(session, "user", "What was my locker code?")
    with httpx.Client(base_url=ui.url, cookies={COOKIE: ui.keys["admin"]}) as browser:
        response = browser.get(
            f"/sessions/{session.id}",
            params={"strategy": "relevant", "budget_tokens": "400"},
            headers={"Accept": "text/html"},
        )
    assert response.status_code == 200
    page = html.unescape(response.text)
    assert 'value="relevant"' in page  # the strategy picker lists it
    assert "Context preview · relevant" in page
    preview = page[page.index("Context preview · relevant") :]
    assert "older ones below recalled as relevant to this turn" in preview
    assert "My locker code is 4471." in preview
