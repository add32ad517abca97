"""The web UI in a real browser: list, filter, open, inspect, manage, chat, live update, login."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from tests.server.conftest import Service
from tests.server.upstream import Upstream

from .conftest import chip_seqs, new_page, open_context, screenshot


def seed(service: Service) -> dict[str, str]:
    """A few sessions in two projects; returns their ids by key."""
    tk = service.tk
    support = tk.create_session(
        key="support-42", project="alpha", subject="ticket-7", kind="support",
        title="Refund for order 42", phase="execute", ttl=timedelta(days=7),
    )  # fmt: skip
    tk.append(support, "system", "You are a courteous support agent.")
    tk.append(support, "user", "My order **42** arrived broken.", author="ana")
    tk.append(support, "assistant", "Sorry to hear that! I can:\n\n- refund\n- replace")
    tk.append(
        support, "assistant", "checked the order database", internal=True, author="tool-agent"
    )
    tk.append(support, "user", "A refund, please.", author="ana")
    planning = tk.create_session(
        key="roadmap", project="alpha", kind="planning", title="Q3 roadmap", phase="plan"
    )
    tk.append(planning, "user", "List the themes.")
    other = tk.create_session(key="beta-only", project="beta", kind="support", title="Beta chat")
    tk.append(other, "user", "hello from beta")
    return {"support": support.id, "planning": planning.id, "other": other.id}


def rows(page: Page) -> list[str]:
    return page.locator("table.sessions a.session-link").all_inner_texts()


def apply_filter(page: Page) -> None:
    """Submit the filter form and wait for the page it loads (the rows read before it would
    be the old page's, or none while it loads)."""
    with page.expect_navigation():
        page.get_by_role("button", name="Filter").click()


def test_lists_sessions_by_last_activity_with_counts_tokens_and_expiry(
    as_admin: Page, ui: Service
) -> None:
    seed(ui)
    as_admin.goto("/")
    assert rows(as_admin) == ["Beta chat", "Q3 roadmap", "Refund for order 42"]
    support = as_admin.locator("tr", has_text="Refund for order 42")
    expect(support.locator('td[data-label="Messages"]')).to_have_text("5")
    expect(support.locator('td[data-label="Expires"]')).to_contain_text("in 6 d")
    tokens = int(support.locator('td[data-label="Tokens"]').inner_text().replace(",", ""))
    assert tokens == ui.tk.get_session("support-42", project="alpha").stored_tokens
    screenshot(as_admin, "sessions")


def test_the_list_stays_readable_on_a_phone(as_admin: Page, ui: Service) -> None:
    seed(ui)
    as_admin.set_viewport_size({"width": 390, "height": 844})
    as_admin.goto("/")
    expect(as_admin.locator("table.sessions thead")).to_be_hidden()
    expect(as_admin.locator('td[data-label="Tokens"]').first).to_be_visible()
    overflow = as_admin.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    assert overflow is False
    screenshot(as_admin, "sessions-phone")


def test_filters_by_search_project_kind_status_and_phase(as_admin: Page, ui: Service) -> None:
    seed(ui)
    ui.tk.archive_session("roadmap", project="alpha")
    as_admin.goto("/")
    as_admin.get_by_label("Search").fill("ORDER 42")
    apply_filter(as_admin)
    assert rows(as_admin) == ["Refund for order 42"]
    as_admin.goto("/?kind=support")
    assert rows(as_admin) == ["Beta chat", "Refund for order 42"]
    as_admin.get_by_label("Project").select_option("beta")
    apply_filter(as_admin)
    assert rows(as_admin) == ["Beta chat"]
    as_admin.goto("/")
    as_admin.get_by_label("Status").select_option("archived")
    apply_filter(as_admin)
    assert rows(as_admin) == ["Q3 roadmap"]
    as_admin.goto("/?phase=execute")
    assert rows(as_admin) == ["Refund for order 42"]
    as_admin.goto("/?q=nothing-like-this")
    expect(as_admin.get_by_role("heading", name="No sessions match these filters")).to_be_visible()


def test_a_project_key_sees_only_its_own_project(as_alpha: Page, ui: Service) -> None:
    ids = seed(ui)
    as_alpha.goto("/")
    assert rows(as_alpha) == ["Q3 roadmap", "Refund for order 42"]
    as_alpha.goto(f"/sessions/{ids['other']}")
    expect(as_alpha.get_by_role("heading", name="Not found")).to_be_visible()


def test_pages_through_sessions_with_a_cursor(as_admin: Page, ui: Service) -> None:
    for index in range(30):
        ui.tk.create_session(key=f"s-{index:02}", project="alpha")
    as_admin.goto("/")
    first = rows(as_admin)
    with as_admin.expect_navigation():
        as_admin.get_by_role("link", name="Next page →").click()
    second = rows(as_admin)
    assert len(first) == 25 and len(second) == 5
    assert set(first).isdisjoint(second)
    expect(as_admin.get_by_role("link", name="Next page →")).to_have_count(0)


def test_opens_a_session_as_a_chat_hiding_internal_messages_until_asked(
    as_admin: Page, ui: Service
) -> None:
    seed(ui)
    as_admin.goto("/")
    as_admin.get_by_role("link", name="Refund for order 42").click()
    expect(as_admin.get_by_role("heading", name="Refund for order 42")).to_be_visible()
    transcript = as_admin.locator("#transcript")
    expect(transcript.locator(".divider.system")).to_contain_text("courteous support agent")
    expect(transcript.locator(".msg.role-user").first.locator(".author")).to_have_text("ana")
    expect(transcript.locator("strong", has_text="42")).to_be_visible()  # markdown rendered
    expect(transcript.locator("li", has_text="replace")).to_be_visible()
    expect(transcript).not_to_contain_text("checked the order database")
    expect(as_admin.locator("#stat-messages")).to_have_text("5")
    as_admin.get_by_role("switch", name="Show internal messages").click()
    expect(transcript.locator(".msg.internal")).to_contain_text("checked the order database")
    expect(transcript.locator(".msg.internal .author")).to_have_text("tool-agent")
    screenshot(as_admin, "session")


def test_a_phase_change_is_a_divider_in_the_transcript(as_admin: Page, ui: Service) -> None:
    ids = seed(ui)
    ui.tk.append("support-42", "system", "handed to billing", project="alpha",
                 metadata={"phase": "billing"})  # fmt: skip
    as_admin.goto(f"/sessions/{ids['support']}")
    expect(as_admin.locator(".divider.phase")).to_contain_text("Phase → billing")


def test_a_script_in_a_message_is_shown_as_text_and_never_runs(as_admin: Page, ui: Service) -> None:
    session = ui.tk.create_session(key="xss", project="alpha")
    payloads = [
        "<script>window.__pwned = 1</script>",
        '<img src=x onerror="window.__pwned = 2">',
        "[click me](javascript:window.__pwned=3)",
    ]
    for payload in payloads:
        ui.tk.append(session, "user", payload)
    as_admin.goto(f"/sessions/{session.id}")
    transcript = as_admin.locator("#transcript")
    expect(transcript).to_contain_text("<script>window.__pwned = 1</script>")
    expect(transcript).to_contain_text('<img src=x onerror="window.__pwned = 2">')
    expect(transcript.locator("script, img")).to_have_count(0)
    expect(transcript.locator("a[href^=javascript]")).to_have_count(0)
    assert as_admin.evaluate("typeof window.__pwned") == "undefined"


def test_previews_the_context_under_two_strategies(as_admin: Page, ui: Service) -> None:
    session = ui.tk.create_session(key="long", project="alpha", title="Long chat")
    ui.tk.append(session, "system", "Be brief.")
    for turn in range(12):
        ui.tk.append(session, "user", f"question {turn} " + "words " * 40)
        ui.tk.append(session, "assistant", f"answer {turn} " + "words " * 40)
    as_admin.goto(f"/sessions/{session.id}")
    as_admin.get_by_label("Strategy").select_option("full")
    as_admin.get_by_role("button", name="Preview context").click()
    preview = as_admin.locator("#context")
    expect(preview.locator("h2")).to_have_text("Context preview · full")
    expect(preview.locator(".counts .kept span")).to_have_text("25")
    expect(preview.locator(".counts .dropped span")).to_have_text("0")

    as_admin.get_by_label("Strategy").select_option("sliding_window")
    as_admin.get_by_label("Token budget").fill("600")
    as_admin.get_by_role("button", name="Preview context").click()
    expect(preview.locator("h2")).to_have_text("Context preview · sliding_window")
    expect(preview.locator(".budget-text")).to_contain_text("of 600 tokens")
    dropped = int(preview.locator(".counts .dropped span").inner_text())
    kept = int(preview.locator(".counts .kept span").inner_text())
    assert dropped > 0 and kept + dropped == 25
    expect(preview.locator(".window .kind-message").first).to_contain_text("Be brief.")
    expect(as_admin.locator("#m2 .badge.dropped")).to_be_visible()  # marked in the transcript
    expect(as_admin.locator("#m25 .badge.kept")).to_be_visible()
    width = preview.locator(".budget-fill").evaluate("el => el.style.width")
    assert width.endswith("%") and 0 < float(width[:-1]) <= 100
    screenshot(as_admin, "context-preview")


def test_the_preview_names_every_message_it_drops_and_tags_internal_ones(
    as_admin: Page, ui: Service
) -> None:
    session = ui.tk.create_session(key="notes", project="alpha", title="With notes")
    ui.tk.append(session, "system", "Be brief.")
    for turn in range(30):
        ui.tk.append(session, "user", f"question {turn} " + "words " * 20)
        ui.tk.append(session, "assistant", f"note {turn}", internal=True, author="tool-agent")
    as_admin.goto(f"/sessions/{session.id}?strategy=sliding_window&budget_tokens=300")
    preview = as_admin.locator("#context")
    dropped = int(preview.locator(".counts .dropped span").inner_text())
    named = chip_seqs(preview.locator("#dropped-seqs a.chip.dropped").all_inner_texts())
    assert dropped > 20 and len(named) == dropped  # older messages it never read included
    assert named == list(range(2, 2 + dropped))
    marker = preview.locator(".window .kind-marker").inner_text()
    assert f"{dropped} older messages" in marker
    internal = preview.locator(".window .wmsg.internal")
    expect(internal.first).to_be_visible()
    assert internal.count() == preview.locator(".window .badge.internal").count() > 0
    for text in internal.all_inner_texts():
        assert "note" in text  # only the internal messages are tagged
    question = preview.locator(".window .wmsg", has_text="question 29")
    expect(question).not_to_have_class(re.compile("internal"))


def test_previews_one_agents_perspective(as_admin: Page, ui: Service) -> None:
    session = ui.tk.create_session(key="team", project="alpha", title="Team chat")
    ui.tk.append(session, "user", "Plan the launch", author="user")
    ui.tk.append(session, "assistant", "Here is a plan.", author="planner")
    ui.tk.append(session, "user", "Reviewer, thoughts?", author="user")
    as_admin.goto(f"/sessions/{session.id}")
    as_admin.get_by_label("Strategy").select_option("full")
    as_admin.get_by_label("Agent").fill("reviewer")
    as_admin.get_by_role("button", name="Preview context").click()
    window = as_admin.locator("#context .window")
    expect(window).to_contain_text("[planner]")  # another agent's turn, attributed
    expect(as_admin.get_by_label("Agent")).to_have_value("reviewer")


def test_a_budget_too_small_is_explained_in_the_preview(as_admin: Page, ui: Service) -> None:
    session = ui.tk.create_session(key="tiny", project="alpha")
    ui.tk.append(session, "user", "hello " * 200)
    as_admin.goto(f"/sessions/{session.id}?strategy=truncate&budget_tokens=5")
    expect(as_admin.locator("#context .error")).to_be_visible()


def test_reset_keeps_the_system_message_once_confirmed(as_admin: Page, ui: Service) -> None:
    ids = seed(ui)
    as_admin.goto(f"/sessions/{ids['support']}")
    dialogs: list[str] = []
    as_admin.on("dialog", lambda dialog: dialogs.append(dialog.message))
    as_admin.get_by_role("button", name="Reset history").click()
    expect(as_admin.locator(".notice")).to_have_text("The history was cleared.")
    assert dialogs and "cannot be undone" in dialogs[0]
    assert [m.role for m in ui.tk.history("support-42", project="alpha")] == ["system"]
    expect(as_admin.locator("#transcript .msg")).to_have_count(0)
    expect(as_admin.locator("#transcript .divider.system")).to_have_count(1)


def test_a_declined_confirmation_changes_nothing(browser: Browser, ui: Service) -> None:
    ids = seed(ui)
    context = open_context(browser, ui, "admin")
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.dismiss())
    page.goto(f"/sessions/{ids['support']}")
    page.get_by_role("button", name="Delete").click()
    page.wait_for_timeout(300)
    assert ui.tk.get_session(ids["support"]).message_count == 5
    context.close()


def test_archive_makes_the_session_read_only(as_admin: Page, ui: Service) -> None:
    ids = seed(ui)
    as_admin.goto(f"/sessions/{ids['planning']}")
    as_admin.get_by_role("button", name="Archive").click()
    expect(as_admin.locator(".session-head .status")).to_have_text("archived")
    expect(as_admin.locator(".composer")).to_contain_text("takes no new messages")
    assert ui.tk.get_session(ids["planning"]).status == "archived"


def test_delete_removes_the_session_and_returns_to_the_list(as_admin: Page, ui: Service) -> None:
    ids = seed(ui)
    as_admin.goto(f"/sessions/{ids['planning']}")
    as_admin.get_by_role("button", name="Delete").click()
    expect(as_admin.locator(".notice")).to_have_text("The session was deleted.")
    assert "Q3 roadmap" not in rows(as_admin)
    assert re.fullmatch(r".*/\?notice=deleted", as_admin.url)


def test_chat_streams_the_reply_from_the_model_and_stores_both_turns(
    as_admin: Page, ui: Service, upstream: Upstream
) -> None:
    ids = seed(ui)
    as_admin.goto(f"/sessions/{ids['planning']}")
    as_admin.get_by_label("Your message").fill("What about <b>pricing</b>?")
    as_admin.get_by_role("button", name="Send").click()
    reply = as_admin.locator("#transcript .msg.role-assistant[data-seq]")
    expect(reply).to_contain_text("reply 1 to: What about <b>pricing</b>?")
    expect(as_admin.locator("#transcript .msg.pending")).to_have_count(0)
    assert upstream.requests[0]["stream"] is True
    assert upstream.requests[0]["messages"][-1]["content"] == "What about <b>pricing</b>?"
    stored = ui.tk.history(ids["planning"])
    assert [m.role for m in stored] == ["user", "user", "assistant"]
    assert stored[-1].content == "reply 1 to: What about <b>pricing</b>?"
    screenshot(as_admin, "chat")


def test_a_failing_model_is_reported_and_the_message_is_kept(
    as_admin: Page, ui: Service, upstream: Upstream
) -> None:
    ids = seed(ui)
    upstream.mode = "error"
    as_admin.goto(f"/sessions/{ids['planning']}")
    as_admin.get_by_label("Your message").fill("anyone there?")
    as_admin.get_by_role("button", name="Send").click()
    expect(as_admin.locator("#chat-status")).to_contain_text("The model failed")
    expect(as_admin.locator("#transcript .msg[data-seq]").last).to_contain_text("anyone there?")


def test_without_a_model_the_page_says_how_to_configure_one_and_adds_by_hand(
    browser: Browser, ui_without_model: Service
) -> None:
    session = ui_without_model.tk.create_session(key="manual", project="alpha")
    context = open_context(browser, ui_without_model, "a")
    page = new_page(context)
    page.goto(f"/sessions/{session.id}")
    expect(page.locator("#no-model")).to_contain_text("TURNKEEPER_LLM_BASE_URL")
    expect(page.locator("#chat-form")).to_have_count(0)
    page.get_by_label("Role").select_option("assistant")
    page.get_by_label("Author").fill("pm-agent")
    page.locator("#m-content").fill("Typed by *hand*.")
    page.get_by_role("button", name="Add message").click()
    expect(page.locator("#transcript .msg.role-assistant .author")).to_have_text("pm-agent")
    expect(page.locator("#transcript em", has_text="hand")).to_be_visible()
    assert ui_without_model.tk.history(session)[0].author == "pm-agent"
    context.close()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_without_keys_the_ui_reads_chats_and_deletes_at_a_loopback_name(
    browser: Browser, ui_without_keys: Service, upstream: Upstream, host: str
) -> None:
    """What `make run` serves: no login, and the forms and the streamed chat pass the Host and
    cross-site checks from the UI's own pages."""
    ids = seed(ui_without_keys)
    base = ui_without_keys.url.replace("127.0.0.1", host)
    context = browser.new_context(base_url=base)
    page = new_page(context)
    page.goto("/")
    assert "Q3 roadmap" in rows(page) and "Beta chat" in rows(page)  # every project: admin
    page.get_by_role("link", name="Q3 roadmap").click()
    page.get_by_label("Your message").fill("and the budget?")
    page.get_by_role("button", name="Send").click()
    reply = page.locator("#transcript .msg.role-assistant[data-seq]")
    expect(reply).to_contain_text("reply 1 to: and the budget?")
    page.get_by_role("button", name="Delete").click()
    expect(page.locator(".notice")).to_have_text("The session was deleted.")
    assert "Q3 roadmap" not in rows(page)
    assert ui_without_keys.tk.history(ids["support"])  # the rest is untouched
    context.close()


def test_messages_appended_elsewhere_appear_without_a_reload(as_admin: Page, ui: Service) -> None:
    ids = seed(ui)
    as_admin.goto(f"/sessions/{ids['planning']}")
    as_admin.evaluate("window.__sameDocument = true")
    ui.tk.append(ids["planning"], "assistant", "Appended by **another** client.")
    expect(as_admin.locator("#transcript strong", has_text="another")).to_be_visible(timeout=6000)
    expect(as_admin.locator("#stat-messages")).to_have_text("2")
    expect(as_admin.locator("#stats")).to_contain_text("assistant 1")
    assert as_admin.evaluate("window.__sameDocument") is True  # no reload happened


def test_a_poll_answered_while_the_page_is_left_does_not_reload_it(
    as_admin: Page, ui: Service
) -> None:
    """Deleting a session from its page: the transcript's poll may be answered 404 (the session
    is gone) after the delete was posted and before its answer arrives. It must not reload the
    page the user is leaving, or they land on "Not found" instead of the list (seen under load
    in the suite). Here the page is made to be leaving, and the next poll answered 404."""
    ids = seed(ui)
    as_admin.goto(f"/sessions/{ids['planning']}")
    as_admin.evaluate("window.__sameDocument = true")
    polled = []

    def gone(route: Route) -> None:
        polled.append(route.request.url)
        route.fulfill(status=404, body="gone")

    as_admin.route("**/messages?after_seq=*", gone)
    as_admin.evaluate("window.dispatchEvent(new Event('beforeunload'))")
    as_admin.wait_for_timeout(2600)  # past the next poll (every 2 s)
    assert polled, "the transcript did not poll"
    assert as_admin.evaluate("window.__sameDocument") is True  # not reloaded


def test_logs_in_with_an_api_key_and_out_again(browser: Browser, ui: Service) -> None:
    seed(ui)
    context = open_context(browser, ui, None)
    page = new_page(context)
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/login$"))
    page.get_by_label("API key").fill("tk_not_a_real_key")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_have_text("That API key was not accepted.")
    screenshot(page, "login")
    page.get_by_label("API key").fill(ui.keys["b"])
    page.get_by_role("button", name="Log in").click()
    expect(page.locator(".who")).to_contain_text("project beta")
    assert rows(page) == ["Beta chat"]
    cookie = next(c for c in context.cookies() if c["name"] == "turnkeeper_key")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/login$"))
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/login$"))
    context.close()


def test_the_preview_shows_above_the_transcript_where_the_user_looks(
    as_admin: Page, ui: Service
) -> None:
    session = ui.tk.create_session(key="very-long", project="alpha", title="Very long")
    ui.tk.append(session, "system", "Be brief.")
    for turn in range(40):
        ui.tk.append(session, "user", f"question {turn} " + "words " * 30)
    as_admin.goto(f"/sessions/{session.id}")
    as_admin.get_by_label("Strategy").select_option("sliding_window")
    as_admin.get_by_role("button", name="Preview context").click()
    preview = as_admin.locator("#context")
    expect(preview).to_be_in_viewport()
    top = preview.bounding_box()
    transcript = as_admin.locator("#transcript").bounding_box()
    assert top is not None and transcript is not None and top["y"] < transcript["y"]
    as_admin.get_by_role("link", name="Close preview").click()
    expect(as_admin.locator("#context")).to_have_count(0)


def test_the_not_found_page_keeps_the_search_box_and_log_out(as_alpha: Page, ui: Service) -> None:
    response = as_alpha.goto("/sessions/no-such-session")
    assert response is not None and response.status == 404
    expect(as_alpha.locator("main h1")).to_have_text("Not found")
    expect(as_alpha.get_by_role("searchbox", name="Find messages")).to_be_visible()
    expect(as_alpha.get_by_role("button", name="Log out")).to_be_visible()
    expect(as_alpha.locator(".who")).to_contain_text("alpha")
