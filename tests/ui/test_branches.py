"""Branches in the browser: 'Branch from here', 'Edit and regenerate', the branch switcher."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.server.conftest import Service
from tests.server.upstream import Upstream

from .conftest import screenshot


def _trip(ui: Service) -> str:
    tk = ui.tk
    session = tk.create_session(key="trip", project="alpha", title="Trip to Lisbon")
    tk.append(session, "system", "You are a travel agent.")
    tk.append(session, "user", "Where should I stay?", author="ana")
    tk.append(session, "assistant", "Alfama or Baixa.")
    tk.append(session, "user", "Which is quieter?", author="ana")
    return session.id


def test_branch_from_here_opens_a_branch_that_says_where_it_came_from(
    as_admin: Page, ui: Service
) -> None:
    source = _trip(ui)
    as_admin.goto(f"/sessions/{source}")
    as_admin.locator("#m3").get_by_role("button", name="Branch from here").click()
    expect(as_admin).not_to_have_url(re.compile(source))
    branch = as_admin.url.split("/sessions/")[1].split("?")[0]
    expect(as_admin.locator("#forked-from")).to_contain_text("Trip to Lisbon")
    expect(as_admin.locator("#forked-from")).to_contain_text("#3")
    expect(as_admin.locator("#transcript .msg[data-seq]")).to_have_count(2)
    expect(as_admin.locator("#fork-point")).to_be_visible()
    assert [m.content for m in ui.tk.history(branch)][-1] == "Alfama or Baixa."
    screenshot(as_admin, "branch")
    # the switcher goes back to the source, whose switcher lists the branch
    as_admin.locator("#branches").get_by_role("link", name="Trip to Lisbon").first.click()
    expect(as_admin).to_have_url(re.compile(f"/sessions/{source}$"))
    switcher = as_admin.locator(".branch-switcher")
    expect(switcher).to_contain_text("branch at #3")
    expect(switcher.locator("a.current")).to_have_attribute("href", f"/sessions/{source}")
    expect(as_admin.locator("#transcript .msg[data-seq]")).to_have_count(3)


def test_edit_and_regenerate_answers_the_edited_message_on_a_branch(
    as_admin: Page, ui: Service, upstream: Upstream
) -> None:
    source = _trip(ui)
    as_admin.goto(f"/sessions/{source}")
    message = as_admin.locator("#m4")
    message.get_by_text("Edit and regenerate").click()
    message.get_by_label("Edited message #4").fill("Which is livelier?")
    message.get_by_role("button", name="Regenerate on a new branch").click()
    expect(as_admin).not_to_have_url(re.compile(source))
    reply = as_admin.locator("#transcript .msg.role-assistant[data-seq]").last
    expect(reply).to_contain_text("to: Which is livelier?")
    branch = as_admin.url.split("/sessions/")[1].split("?")[0]
    said = [(m.role.value, m.content) for m in ui.tk.history(branch)]
    assert said[:4] == [
        ("system", "You are a travel agent."),
        ("user", "Where should I stay?"),
        ("assistant", "Alfama or Baixa."),
        ("user", "Which is livelier?"),
    ]
    assert said[4][0] == "assistant" and len(said) == 5
    sent = upstream.requests[-1]["messages"]
    assert [m["content"] for m in sent][-1] == "Which is livelier?"
    assert "Which is quieter?" not in [m["content"] for m in sent]
    # the original line is untouched
    assert [m.content for m in ui.tk.history(source)][-1] == "Which is quieter?"
    expect(as_admin.locator("#forked-from")).to_contain_text("#3")


def test_a_branch_of_an_untitled_session_gets_a_readable_name(
    as_admin: Page, ui: Service, upstream: Upstream
) -> None:
    session = ui.tk.create_session(project="alpha")  # no title, no key
    ui.tk.append(session, "user", "Where should I stay in Lisbon?")
    ui.tk.append(session, "assistant", "Alfama or Baixa.")
    as_admin.goto(f"/sessions/{session.id}")
    message = as_admin.locator("#m1")
    message.get_by_text("Edit and regenerate").click()
    message.get_by_label("Edited message #1").fill("Where should I stay in Porto?")
    message.get_by_role("button", name="Regenerate on a new branch").click()
    expect(as_admin).not_to_have_url(re.compile(session.id))
    heading = as_admin.locator("h1")
    expect(heading).to_have_text("Untitled session · edit of #1: Where should I stay in Porto?")
    branch = as_admin.url.split("/sessions/")[1].split("?")[0]
    for label in as_admin.locator(".branch-switcher a").all_inner_texts():
        assert branch not in label and session.id not in label
        assert not re.fullmatch(r"[0-9a-f]{8}", label)  # never an id's prefix alone
    expect(as_admin.locator(".branch-switcher")).to_contain_text("edit of #1")


def test_branch_from_here_shows_on_hover_or_keyboard_focus_only(
    as_admin: Page, ui: Service
) -> None:
    source = _trip(ui)
    as_admin.goto(f"/sessions/{source}")
    actions = as_admin.locator("#m3 .msg-actions")
    button = as_admin.locator("#m3").get_by_role("button", name="Branch from here")

    def opacity() -> str:
        return str(actions.evaluate("el => getComputedStyle(el).opacity"))

    as_admin.mouse.move(0, 0)
    assert opacity() == "0"  # not on every bubble at once
    as_admin.locator("#m3").hover()
    assert opacity() == "1"
    as_admin.mouse.move(0, 0)
    assert opacity() == "0"
    button.focus()  # the keyboard reaches it, and it shows
    assert opacity() == "1"
    as_admin.keyboard.press("Enter")
    expect(as_admin.locator("#forked-from")).to_contain_text("#3")
