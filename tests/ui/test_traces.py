""" "What the model saw" in a real browser: every assistant reply produced by a chat turn links
to its trace, the exact window re-rendered, and the diff against the previous turn's window."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.server.conftest import Service
from tests.server.upstream import Upstream

from .conftest import chip_seqs, screenshot


def window_texts(page: Page, where: str) -> list[str]:
    return page.locator(f"{where} > .trace-entry .trace-content").all_inner_texts()


def test_a_reply_made_in_the_ui_chat_shows_the_window_the_model_saw(
    as_admin: Page, ui: Service, upstream: Upstream
) -> None:
    session = ui.tk.create_session(key="ui-chat", project="alpha", title="Trip")
    ui.tk.append(session, "system", "You plan trips.")
    as_admin.goto(f"/sessions/{session.id}")
    for text in ("Four days in Lisbon.", "Where should we eat?"):
        as_admin.get_by_label("Your message").fill(text)
        as_admin.get_by_role("button", name="Send").click()
        expect(as_admin.locator("#transcript .msg.role-assistant[data-seq]").last).to_contain_text(
            f"to: {text}"
        )
        expect(as_admin.locator("#transcript .msg.pending")).to_have_count(0)
    as_admin.locator("#m5").get_by_role("link", name="What the model saw").click()
    expect(as_admin.locator("h1")).to_have_text("What the model saw for reply #5")
    sent = [m["content"] for m in upstream.requests[1]["messages"]]
    assert window_texts(as_admin, "#window .trace-window") == sent
    expect(as_admin.locator("#trace-facts")).to_contain_text("ui · request")
    expect(as_admin.locator("#trace-facts")).not_to_contain_text("not reported")
    expect(as_admin.locator("#diff")).to_contain_text("2 entered, 0 fell out, 2 stayed")
    assert window_texts(as_admin, "#diff .entered") == sent[2:]
    screenshot(as_admin, "trace")


def test_the_diff_shows_what_fell_out_of_a_tight_window(
    as_admin: Page, ui: Service, upstream: Upstream
) -> None:
    with ui.client("b") as beta:  # another project than the default: linked by id, reachable
        for n in range(3):
            answer = beta.post(
                "/v1/sessions/tight/chat",
                json={"content": f"turn {n} " + "padding " * 40, "create": True,
                      "strategy": "sliding_window", "budget_tokens": 200},
            )  # fmt: skip
            assert answer.status_code == 200
        session_id = answer.json()["session"]["id"]
    as_admin.goto("/?project=beta")
    as_admin.get_by_role("link", name="tight").click()
    as_admin.locator("#m6").get_by_role("link", name="What the model saw").click()
    expect(as_admin.locator("#trace-facts")).to_contain_text("sliding_window")
    fell_out = as_admin.locator("#diff .left > .trace-entry[data-seq]")
    expect(fell_out.first).to_be_visible()
    dropped = chip_seqs(as_admin.locator("#trace-facts a.chip.dropped").all_inner_texts())
    marker = as_admin.locator("#window .trace-entry[data-kind=marker]").inner_text()
    assert dropped and f"{len(dropped)} older messages" in marker  # names what it counts
    assert as_admin.url.endswith(f"/sessions/{session_id}/messages/6/trace")
    as_admin.get_by_role("link", name="reply #4").click()
    expect(as_admin.locator("h1")).to_have_text("What the model saw for reply #4")


def test_internal_messages_the_model_saw_are_tagged_in_the_trace(
    as_admin: Page, ui: Service, upstream: Upstream
) -> None:
    session = ui.tk.create_session(key="noted", project="alpha")
    ui.tk.append(session, "user", "Book a table.")
    ui.tk.append(session, "assistant", "checked availability", internal=True, author="tool-agent")
    with ui.client("a") as alpha:
        assert (
            alpha.post("/v1/sessions/noted/chat", json={"content": "For two."}).status_code == 200
        )
    as_admin.goto(f"/sessions/{session.id}/messages/4/trace")
    entries = as_admin.locator("#window .trace-window > .trace-entry")
    assert entries.all_inner_texts()[1].count("checked availability") == 1
    expect(entries.nth(1).locator(".badge.internal")).to_have_text("internal")
    expect(entries.nth(0).locator(".badge.internal")).to_have_count(0)
    expect(entries.nth(2).locator(".badge.internal")).to_have_count(0)


def test_a_message_without_a_trace_says_so(as_admin: Page, ui: Service) -> None:
    session = ui.tk.create_session(key="hand", project="alpha")
    ui.tk.append(session, "user", "typed by hand")
    response = as_admin.goto(f"/sessions/{session.id}/messages/1/trace")
    assert response is not None and response.status == 404
    expect(as_admin.locator("main")).to_contain_text("has no trace")


def test_the_trace_says_whether_the_previous_window_stayed_its_prefix(
    as_admin: Page, ui: Service, upstream: Upstream
) -> None:
    session = ui.tk.create_session(key="ui-prefix", project="alpha")
    ui.tk.append(session, "system", "You plan trips.")
    for text in ("Four days in Lisbon.", "Where should we eat?"):
        as_admin.goto(f"/sessions/{session.id}")
        as_admin.get_by_label("Your message").fill(text)
        as_admin.get_by_role("button", name="Send").click()
        expect(as_admin.locator("#transcript .msg.role-assistant[data-seq]").last).to_contain_text(
            f"to: {text}"
        )
    as_admin.goto(f"/sessions/{session.id}/messages/5/trace")
    expect(as_admin.locator("#prefix")).to_contain_text("is the start of this one")
