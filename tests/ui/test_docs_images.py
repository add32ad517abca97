"""The pictures of the documentation are taken here, by a browser driving the real service, so
they show the UI as it is: a session with its branch switcher and context preview, the search
page, and what the model saw for a reply. Each test checks what its picture must show, then
saves it under docs/images/ (1280×800, the first screen only, to keep the files small).

Times, ids and latencies change from run to run; they are replaced by fixed text before each
picture, so a picture file changes only when the page does.
"""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from tests.server.conftest import Service
from tests.server.upstream import Upstream

IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
VIEWPORT = {"width": 1280, "height": 800}

STEADY = r"""() => {
  const seen = new Map();  // each id (or its 8-character short form) → a fixed stand-in, in order
  const ids = /\b[0-9a-f]{8}(?:-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})?\b/g;
  const steady = (id) => {
    const short = id.slice(0, 8);
    if (!seen.has(short)) seen.set(short, (seen.size + 1).toString(16).padStart(8, "a"));
    return seen.get(short) + (id.length > 8 ? "-0000-4000-8000-000000000000" : "");
  };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!/\d/.test(node.textContent)) continue;
    node.textContent = node.textContent
      .replace(/\b[0-9a-f]{32}\b/g, "5f0c2e7a9b1d4c3e8a6f0b2d4e6c8a0b")  // a request id
      .replace(/^\d+ ms\b/, "412 ms")  // a latency
      .replace(ids, steady);
  }
  for (const node of document.querySelectorAll("time")) node.textContent = "2026-11-20 09:30";
}"""


def picture(page: Page, name: str) -> Path:
    """Save the first screen of `page` as docs/images/NAME.png, unless it looks the same."""
    page.evaluate(STEADY)
    IMAGES.mkdir(parents=True, exist_ok=True)
    path = IMAGES / f"{name}.png"
    taken = page.screenshot(animations="disabled", caret="hide")
    if not path.exists() or path.read_bytes() != taken:
        path.write_bytes(taken)
    return path


def _lisbon_trip(page: Page, ui: Service) -> str:
    """A conversation made through the UI's chat (so its replies have traces), and a branch."""
    session = ui.tk.create_session(key="lisbon-trip", project="alpha", title="Four days in Lisbon")
    ui.tk.append(session, "system", "You plan trips. Be brief.")
    page.set_viewport_size(VIEWPORT)
    page.goto(f"/sessions/{session.id}")
    for text in ("Four days in Lisbon in May: where should we stay?", "Which tram goes to Belém?"):
        page.get_by_label("Your message").fill(text)
        page.get_by_role("button", name="Send").click()
        expect(page.locator("#transcript .msg.role-assistant[data-seq]").last).to_contain_text(
            f"to: {text}"
        )
        expect(page.locator("#transcript .msg.pending")).to_have_count(0)
    ui.tk.fork(session, 3, key="lisbon-trip-porto", title="Four days in Lisbon · Porto instead")
    return session.id


def test_the_session_picture_shows_the_transcript_branches_and_search(
    as_admin: Page, ui: Service, upstream: Upstream
) -> None:
    session = _lisbon_trip(as_admin, ui)
    as_admin.goto(f"/sessions/{session}")
    expect(as_admin.get_by_role("searchbox", name="Find messages")).to_be_visible()
    expect(as_admin.locator(".branch-switcher")).to_contain_text("branch at #3")
    expect(as_admin.locator("#transcript .msg[data-seq]")).to_have_count(4)  # and a divider
    assert picture(as_admin, "session").stat().st_size < 400_000


def test_the_search_picture_shows_highlighted_hits(
    as_admin: Page, ui: Service, upstream: Upstream
) -> None:
    _lisbon_trip(as_admin, ui)
    as_admin.goto("/search?q=tram")  # said after the branch point: no tie between copies
    expect(as_admin.locator("li.hit")).to_have_count(2)
    expect(as_admin.locator("li.hit mark").first).to_have_text("tram")
    assert picture(as_admin, "search").stat().st_size < 400_000


def test_the_trace_picture_shows_what_the_model_saw(
    as_admin: Page, ui: Service, upstream: Upstream
) -> None:
    session = _lisbon_trip(as_admin, ui)
    as_admin.goto(f"/sessions/{session}")
    as_admin.locator("#m5").get_by_role("link", name="What the model saw").click()
    expect(as_admin.locator("h1")).to_have_text("What the model saw for reply #5")
    expect(as_admin.locator("#diff")).to_contain_text("2 entered")
    assert picture(as_admin, "trace").stat().st_size < 400_000
