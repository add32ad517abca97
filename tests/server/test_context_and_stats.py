"""`GET …/context` and the statistics routes."""

from __future__ import annotations

import httpx
import pytest


@pytest.fixture
def long_session(client: httpx.Client) -> str:
    client.post("/v1/sessions", json={"key": "long"})
    messages = [{"role": "system", "content": "You are a travel agent."}] + [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n}: " + "word " * 20}
        for n in range(30)
    ]
    client.post("/v1/sessions/long/messages/batch", json={"messages": messages})
    return "long"


def test_builds_a_window_under_the_budget_with_its_report(
    client: httpx.Client, long_session: str
) -> None:
    window = client.get(
        f"/v1/sessions/{long_session}/context",
        params={"strategy": "sliding_window", "budget_tokens": 300},
    ).json()
    report = window["report"]
    assert report["tokens_used"] <= 300 and report["truncated"]
    named = [seq for first, last in report["dropped_seqs"] for seq in range(first, last + 1)]
    assert (
        report["messages_dropped"] == len(named) == int(window["messages"][1]["content"].split()[1])
    )
    assert named == list(range(2, named[-1] + 1))  # every older message, as one run
    assert window["messages"][0] == {"role": "system", "content": "You are a travel agent."}
    assert "older messages truncated" in window["messages"][1]["content"]
    assert window["messages"][-1]["content"].startswith("turn 29")


def test_truncate_takes_budget_tokens_reserved_and_keeps_the_first_message(
    client: httpx.Client, long_session: str
) -> None:
    window = client.get(
        f"/v1/sessions/{long_session}/context",
        params={"strategy": "truncate", "budget_tokens": 600, "reserved_tokens": 200},
    ).json()
    assert window["report"]["budget"] == 400
    assert window["messages"][1]["content"] == "[Earlier messages truncated]"


def test_anthropic_format_moves_the_system_text_out(
    client: httpx.Client, long_session: str
) -> None:
    window = client.get(
        f"/v1/sessions/{long_session}/context",
        params={"strategy": "recent", "keep_recent": 4, "format": "anthropic"},
    ).json()
    assert window["system"] is None or "travel agent" not in window["system"]
    assert {m["role"] for m in window["messages"]} <= {"user", "assistant"}
    assert window["report"]["messages_included"] == 4


def test_a_budget_too_small_for_the_trigger_is_a_422_naming_budget_tokens(
    client: httpx.Client, long_session: str
) -> None:
    response = client.get(
        f"/v1/sessions/{long_session}/context", params={"strategy": "full", "budget_tokens": 10}
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "budget_tokens"


def test_context_still_reads_the_budgets_old_name_max_tokens(
    client: httpx.Client, long_session: str
) -> None:
    old = client.get(f"/v1/sessions/{long_session}/context", params={"max_tokens": 300})
    new = client.get(f"/v1/sessions/{long_session}/context", params={"budget_tokens": 300})
    assert old.json()["report"]["budget"] == new.json()["report"]["budget"] == 300


def test_session_stats_split_user_facing_and_internal(client: httpx.Client) -> None:
    client.post("/v1/sessions", json={"key": "st"})
    client.post(
        "/v1/sessions/st/messages/batch",
        json={"messages": [{"role": "user", "content": "hi"},
                           {"role": "assistant", "content": "thinking", "internal": True}]},
    )  # fmt: skip
    stats = client.get("/v1/sessions/st/stats").json()
    assert (stats["user_facing_messages"], stats["internal_messages"]) == (1, 1)
    assert stats["messages_by_role"] == {"user": 1, "assistant": 1}


def test_project_stats_cover_the_callers_project_only(client: httpx.Client) -> None:
    client.post("/v1/sessions", json={"key": "p1"})
    client.post("/v1/sessions/p1/messages", json={"role": "user", "content": "hi"})
    stats = client.get("/v1/stats").json()
    assert [s["project"] for s in stats] == ["alpha"]
    assert stats[0]["message_count"] == 1


def test_relevant_recalls_an_older_turn_the_question_names(
    client: httpx.Client, long_session: str
) -> None:
    client.post(
        "/v1/sessions/long/messages",
        json={"role": "user", "content": "Which turn said turn 3 again?"},
    )
    window = client.get(
        f"/v1/sessions/{long_session}/context",
        params={"strategy": "relevant", "budget_tokens": 300},
    ).json()
    report = window["report"]
    assert report["strategy"] == "relevant" and report["tokens_used"] <= 300
    contents = [message["content"] for message in window["messages"]]
    assert contents[0] == "You are a travel agent."
    assert contents[-1] == "Which turn said turn 3 again?"
    (note,) = report["markers"]
    assert "recalled" in note and contents.index(note) < contents.index("turn 3: " + "word " * 20)
