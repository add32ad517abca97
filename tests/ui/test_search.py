"""Searching message content from the browser: the box on every page, highlighted hits that
open their session, filters, the caller's project only, and a malformed query explained."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.server.conftest import Service

from .conftest import screenshot


def seed(service: Service) -> None:
    tk = service.tk
    trip = tk.create_session(key="trip", project="alpha", title="Lisbon trip", kind="travel")
    tk.append(trip, "user", "Which tram goes to Belém in Lisbon?", author="ana")
    tk.append(trip, "assistant", "Tram 15 runs from Praça da Figueira to Belém.")
    work = tk.create_session(key="offsite", project="alpha", title="Offsite", kind="work")
    tk.append(work, "user", "Book the Lisbon offsite for <b>May</b>")
    secret = tk.create_session(key="beta-trip", project="beta", title="Beta secret")
    tk.append(secret, "user", "Beta goes to Lisbon too")


def test_the_search_box_finds_message_content_with_the_words_highlighted(
    as_alpha: Page, ui: Service
) -> None:
    seed(ui)
    as_alpha.goto("/")
    box = as_alpha.get_by_role("searchbox", name="Find messages")
    box.fill("lisbon")
    box.press("Enter")
    expect(as_alpha).to_have_url("/search?q=lisbon")
    hits = as_alpha.locator("li.hit")
    expect(hits).to_have_count(2)
    expect(as_alpha.locator("li.hit mark").first).to_have_text("Lisbon")
    expect(as_alpha.locator("li.hit", has_text="offsite")).to_contain_text("<b>May</b>")
    assert "Beta" not in as_alpha.locator("main").inner_text()
    screenshot(as_alpha, "search")
    as_alpha.locator("li.hit", has_text="tram").locator("a.session-link").click()
    expect(as_alpha.locator("h1")).to_contain_text("Lisbon trip")


def test_filters_narrow_the_hits(as_alpha: Page, ui: Service) -> None:
    seed(ui)
    as_alpha.goto("/search?q=tram")
    expect(as_alpha.locator("li.hit")).to_have_count(2)
    as_alpha.select_option("#search-role", "assistant")
    as_alpha.get_by_role("button", name="Search").click()
    expect(as_alpha.locator("li.hit")).to_have_count(1)
    expect(as_alpha.locator("li.hit mark")).to_have_text(["Tram"])
    as_alpha.goto("/search?q=lisbon&kind=work")
    expect(as_alpha.locator("li.hit a.session-link")).to_have_text(["Offsite"])


def test_an_admin_searches_every_project_or_one(as_admin: Page, ui: Service) -> None:
    seed(ui)
    as_admin.goto("/search?q=lisbon")
    expect(as_admin.locator("li.hit")).to_have_count(3)
    as_admin.select_option("#search-project", "beta")
    as_admin.get_by_role("button", name="Search").click()
    expect(as_admin.locator("li.hit a.session-link")).to_have_text(["Beta secret"])


def test_a_malformed_query_is_explained_beside_the_box(as_alpha: Page, ui: Service) -> None:
    seed(ui)
    as_alpha.goto("/search")
    as_alpha.fill("#search-q", '"unclosed phrase')
    as_alpha.get_by_role("button", name="Search").click()
    expect(as_alpha.get_by_role("alert")).to_contain_text("unclosed quote")
    expect(as_alpha.locator("#search-q")).to_have_value('"unclosed phrase')
    as_alpha.fill("#search-q", "nothing-like-this")
    as_alpha.get_by_role("button", name="Search").click()
    expect(as_alpha.locator(".empty")).to_contain_text("No messages match")


def test_hits_read_as_text_not_as_markdown_source(as_alpha: Page, ui: Service) -> None:
    session = ui.tk.create_session(key="md", project="alpha", title="Markdown")
    ui.tk.append(
        session, "assistant",
        "## Plan\n\nStay in **Alfama**, eat at [Taberna](https://example.com/t) and ride "
        "`tram 28`. <img src=x onerror=\"window.__pwned = 1\"> "
        "[Alfama again](javascript:window.__pwned=2)",
    )  # fmt: skip
    as_alpha.goto("/search?q=alfama")
    hit = as_alpha.locator("li.hit .snippet")
    expect(hit).to_contain_text("Plan Stay in Alfama, eat at Taberna and ride tram 28.")
    text = hit.inner_text()
    for syntax in ("**", "##", "](", "`"):
        assert syntax not in text
    expect(hit.locator("mark").first).to_have_text("Alfama")
    expect(hit).to_contain_text('<img src=x onerror="window.__pwned = 1">')  # shown, inert
    expect(as_alpha.locator("li.hit").locator("img, script, a[href^=javascript]")).to_have_count(0)
    assert as_alpha.evaluate("typeof window.__pwned") == "undefined"
