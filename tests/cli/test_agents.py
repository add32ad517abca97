"""`turnkeeper agents …`, `context --agent`, `summaries` and `conversation-context`."""

from __future__ import annotations

from tests.cli.conftest import Cli, one_error_line
from turnkeeper.context.perspective import AWAY_HEADER, NEW_INTERACTION


def test_a_multi_agent_conversation_from_the_command_line(cli: Cli) -> None:
    cli.session("--key", "team", "--phase", "chat")
    cli.add("team", "user", "@pm @dev go")
    cli.ok("agents", "responded", "team", "pm", "--reply", "Planned.", "--provider-session", "c1")
    dev = cli.json(
        "agents", "responded", "team", "dev", "--reply", "Built.", "--execution-ms", "70"
    )
    assert dev["agents"][0]["last_processed_seq"] == 3
    event = cli.json("agents", "phase", "team", "verification", "--by", "pm", "--summary", "Done")
    assert event["message"]["metadata"]["event"]["kind"] == "phase_transition"
    cli.ok("agents", "handoff", "team", "pm", "qa", "--summary", "Test it")
    cli.add("team", "user", "@pm status?")
    window = cli.json("context", "team", "--agent", "pm")
    contents = [m["content"] for m in window["messages"]]
    assert contents[:2] == ["@pm @dev go", "Planned."]
    assert contents[-2:] == [NEW_INTERACTION, "@pm status?"]
    assert contents[-3].startswith(AWAY_HEADER)
    states = cli.json("agents", "list", "team")["agents"]
    assert [(s["agent"], s["provider_session_id"]) for s in states] == [("dev", None), ("pm", "c1")]
    assert cli.json("stats", "team")["execution_ms"] == 70
    assert "pm" in cli.ok("agents", "list", "team").stdout


def test_an_unknown_phase_is_a_usage_error(cli: Cli) -> None:
    cli.session("--key", "team")
    result = cli("agents", "phase", "team", "lunch")
    assert result.exit_code == 2


def test_conversation_context_prints_the_planner_text(cli: Cli) -> None:
    cli.session("--key", "chat")
    assert (
        cli.ok("conversation-context", "chat").stdout.strip()
        == "This is the user's first message in this conversation."
    )
    for n in range(20):
        cli.add("chat", "user", f"Message {n}.")
    context = cli.json("conversation-context", "chat")
    assert context["summary"] and len(context["recent_messages"]) == 10
    assert context["planner_context"].startswith("Conversation summary: ")
    assert [s["covers_to_seq"] for s in cli.json("summaries", "chat")["summaries"]] == [10]
    assert "up to #10" in cli.ok("summaries", "chat").stdout


def test_agents_of_a_missing_session_is_one_error_line(cli: Cli) -> None:
    assert "not found" in one_error_line(cli("agents", "list", "nope"))
