"""`turnkeeper add`, `history` and `context`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cli.conftest import Cli, one_error_line


@pytest.fixture
def chat(cli: Cli) -> dict[str, Any]:
    """A session (key `chat`) with a system prompt and six alternating turns."""
    session = cli.session("--key", "chat")
    cli.add("chat", "system", "You are a terse assistant.")
    for n in range(1, 4):
        cli.add("chat", "user", f"Question number {n}: what is {n} plus {n}? " * 3)
        cli.add("chat", "assistant", f"Answer number {n}: it is {2 * n}. " * 3, "--author", "bot")
    return session


# -- add ------------------------------------------------------------------------------------


def test_add_appends_the_text_with_author_and_internal_flag(cli: Cli) -> None:
    s = cli.session("--key", "k")
    first = cli.add("k", "user", "hello", "--author", "ana")
    second = cli.add(s["id"], "assistant", "thinking…", "--internal")
    assert (first["seq"], first["role"], first["content"], first["author"]) == (
        1, "user", "hello", "ana",
    )  # fmt: skip
    assert first["internal"] is False and first["tokens"] > 0
    assert (second["seq"], second["internal"]) == (2, True)


def test_add_dash_reads_the_text_from_stdin(cli: Cli) -> None:
    cli.session("--key", "k")
    out = cli.json("add", "k", "--role", "user", "-", input="line one\nline two\n")
    assert out["message"]["content"] == "line one\nline two"


def test_add_without_text_reads_stdin(cli: Cli) -> None:
    cli.session("--key", "k")
    out = cli.json("add", "k", "--role", "user", input="from a pipe\n")
    assert out["message"]["content"] == "from a pipe"


def test_add_with_an_id_twice_stores_it_once(cli: Cli) -> None:
    cli.session("--key", "k")
    first = cli.add("k", "user", "once", "--id", "m-1")
    again = cli.add("k", "user", "once", "--id", "m-1")
    assert again == first
    assert len(cli.json("history", "k")["messages"]) == 1


def test_add_prints_a_confirmation_for_people(cli: Cli) -> None:
    s = cli.session("--key", "k")
    out = cli.ok("add", "k", "--role", "user", "hello").stdout
    assert "#1" in out and s["id"] in out


def test_add_with_an_unknown_role_is_an_error_naming_role(cli: Cli) -> None:
    cli.session("--key", "k")
    result = cli("add", "k", "--role", "wizard", "hi")
    assert result.exit_code == 1
    assert one_error_line(result).startswith("error: role:")


def test_add_with_empty_content_is_an_error_naming_content(cli: Cli) -> None:
    cli.session("--key", "k")
    result = cli("add", "k", "--role", "user", "   ")
    assert result.exit_code == 1
    assert one_error_line(result).startswith("error: content:")


def test_add_without_a_role_adds_a_user_message(cli: Cli) -> None:
    cli.session("--key", "k")
    assert cli.json("add", "k", "hi")["message"]["role"] == "user"


def test_add_to_an_unknown_key_creates_the_session_and_says_so(cli: Cli) -> None:
    result = cli.ok("add", "fresh", "hi", "--json")
    session = cli.json("sessions", "show", "fresh")["session"]
    assert json.loads(result.stdout)["message"]["session_id"] == session["id"]
    assert result.stderr == f"Created session {session['id']} with key 'fresh'.\n"
    again = cli.ok("add", "fresh", "again")
    assert (
        again.stderr == ""
        and cli.json("sessions", "show", "fresh")["session"]["id"] == (session["id"])
    )


@pytest.mark.parametrize(
    ("options", "field"),
    [(("--role", "wizard"), "role"), (("--tool-call-id", ""), "tool_call_id")],
)
def test_a_bad_message_to_an_unknown_key_creates_no_session(
    cli: Cli, options: tuple[str, ...], field: str
) -> None:
    result = cli("add", "ghost", *options, "hi")
    assert result.exit_code == 1
    assert one_error_line(result).startswith(f"error: {field}")
    assert cli.json("sessions", "list")["sessions"] == []


def test_add_stores_tool_calls_tool_answers_and_metadata(cli: Cli) -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    asked = cli.add("k", "assistant", "", "--tool-calls", json.dumps(calls))
    answered = cli.add(
        "k", "tool", "42", "--tool-call-id", "c1", "--metadata", '{"source": "calc"}'
    )
    assert asked["tool_calls"] == calls
    assert (answered["tool_call_id"], answered["metadata"]) == ("c1", {"source": "calc"})
    window = cli.json("context", "k")["messages"]
    assert window[0]["tool_calls"] == calls
    assert window[1] == {"role": "tool", "content": "42", "tool_call_id": "c1"}


@pytest.mark.parametrize(
    ("option", "value", "problem"),
    [
        ("--tool-calls", "[1", "not valid JSON"),
        ("--tool-calls", '{"id": "c1"}', "must be a JSON array of tool-call objects"),
        ("--metadata", "{", "not valid JSON"),
        ("--metadata", "[]", "must be a JSON object"),
    ],
)
def test_add_with_bad_json_is_one_line_naming_the_option(
    cli: Cli, option: str, value: str, problem: str
) -> None:
    result = cli("add", "k", option, value, "hi")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert line.startswith(f"error: Invalid value for '{option}': {problem}"), line
    assert cli.json("sessions", "list")["sessions"] == []


def test_add_to_an_archived_session_is_an_error(cli: Cli) -> None:
    s = cli.session()
    cli.ok("sessions", "archive", s["id"])
    result = cli("add", s["id"], "--role", "user", "hi")
    assert result.exit_code == 1
    assert "archived" in one_error_line(result)


# -- history --------------------------------------------------------------------------------


def test_history_lists_every_message_in_order(cli: Cli, chat: dict[str, Any]) -> None:
    out = cli.json("history", "chat")
    assert out["session_id"] == chat["id"]
    assert [m["seq"] for m in out["messages"]] == list(range(1, 8))
    assert out["messages"][0]["content"] == "You are a terse assistant."


def test_history_selects_a_seq_range(cli: Cli, chat: dict[str, Any]) -> None:
    out = cli.json("history", "chat", "--from-seq", "2", "--to-seq", "4")
    assert [m["seq"] for m in out["messages"]] == [2, 3, 4]


def test_history_newest_first_with_a_limit(cli: Cli, chat: dict[str, Any]) -> None:
    out = cli.json("history", "chat", "--newest-first", "--limit", "2")
    assert [m["seq"] for m in out["messages"]] == [7, 6]


def test_history_includes_internal_messages_unless_told_not_to(cli: Cli) -> None:
    cli.session("--key", "k")
    cli.add("k", "user", "visible")
    cli.add("k", "assistant", "hidden", "--internal")
    assert len(cli.json("history", "k")["messages"]) == 2
    assert len(cli.json("history", "k", "--internal")["messages"]) == 2
    shown = cli.json("history", "k", "--no-internal")["messages"]
    assert [m["content"] for m in shown] == ["visible"]


def test_history_prints_a_table_for_people(cli: Cli, chat: dict[str, Any]) -> None:
    out = cli.ok("history", "chat").stdout
    assert "You are a terse assistant." in out
    assert "assistant" in out and "bot" in out


def test_history_with_a_bad_limit_is_an_error_naming_limit(cli: Cli, chat: dict[str, Any]) -> None:
    result = cli("history", "chat", "--limit", "0")
    assert result.exit_code == 1
    assert one_error_line(result).startswith("error: limit:")


# -- context --------------------------------------------------------------------------------


def test_context_json_has_openai_messages_and_the_report(cli: Cli, chat: dict[str, Any]) -> None:
    out = cli.json("context", "chat", "--strategy", "full")
    assert out["messages"][0] == {"role": "system", "content": "You are a terse assistant."}
    assert out["messages"][2]["name"] == "bot"
    assert len(out["messages"]) == 7
    report = out["report"]
    assert report["strategy"] == "full" and report["session_id"] == chat["id"]
    assert report["messages_included"] == 7 and report["truncated"] is False
    assert report["tokens_used"] <= report["budget"]


def test_context_with_a_small_budget_truncates_and_says_so(cli: Cli, chat: dict[str, Any]) -> None:
    out = cli.json("context", "chat", "--strategy", "sliding_window", "--budget", "120")
    report = out["report"]
    assert report["truncated"] is True and report["messages_dropped"] > 0
    named = sum(last - first + 1 for first, last in report["dropped_seqs"])
    assert report["messages_dropped"] == named
    assert report["budget"] == 120 and report["tokens_used"] <= 120
    assert out["messages"][0]["content"] == "You are a terse assistant."
    assert any(marker in m["content"] for m in out["messages"] for marker in report["markers"])


def test_context_takes_the_relevant_strategy(cli: Cli, chat: dict[str, Any]) -> None:
    out = cli.json("context", "chat", "--strategy", "relevant", "--budget", "120")
    report = out["report"]
    assert report["strategy"] == "relevant" and report["tokens_used"] <= 120
    assert out["messages"][0]["content"] == "You are a terse assistant."


def test_context_reserved_tokens_come_off_the_budget(cli: Cli, chat: dict[str, Any]) -> None:
    out = cli.json("context", "chat", "--budget", "500", "--reserved", "100")
    assert out["report"]["budget"] == 400


def test_context_still_takes_the_budgets_old_name(cli: Cli, chat: dict[str, Any]) -> None:
    assert cli.json("context", "chat", "--max-tokens", "500")["report"]["budget"] == 500
    assert "--budget" in cli.ok("context", "--help").stdout


def test_context_recent_keeps_the_last_n_messages(cli: Cli, chat: dict[str, Any]) -> None:
    out = cli.json("context", "chat", "--strategy", "recent", "--keep-recent", "2")
    assert out["report"]["strategy"] == "recent"
    assert [m["role"] for m in out["messages"]][-2:] == ["user", "assistant"]
    assert out["report"]["messages_included"] == 2


def test_context_summarize_summarizes_older_turns(cli: Cli, chat: dict[str, Any]) -> None:
    out = cli.json(
        "context", "chat", "--strategy", "summarize", "--keep-recent", "2", "--budget", "150"
    )
    assert out["report"]["messages_summarized"] > 0


def test_context_leaves_internal_messages_out_of_recent_unless_asked(cli: Cli) -> None:
    cli.session("--key", "k")
    cli.add("k", "user", "visible")
    cli.add("k", "assistant", "hidden", "--internal")
    cli.add("k", "assistant", "answer")

    def contents(*options: str) -> list[str]:
        out = cli.json("context", "k", "--strategy", "recent", *options)
        return [m["content"] for m in out["messages"]]

    assert contents() == ["visible", "answer"]
    assert contents("--internal") == ["visible", "hidden", "answer"]
    assert "hidden" not in contents("--no-internal")


def test_context_pending_turn_comes_last(cli: Cli, chat: dict[str, Any]) -> None:
    out = cli.json("context", "chat", "--pending", "And 4 plus 4?", "--model", "gpt-4o")
    assert out["messages"][-1] == {"role": "user", "content": "And 4 plus 4?"}
    assert len(cli.json("history", "chat")["messages"]) == 7  # not stored


def test_context_in_anthropic_format(cli: Cli, chat: dict[str, Any]) -> None:
    out = cli.json("context", "chat", "--format", "anthropic")
    assert out["system"] == "You are a terse assistant."
    assert [m["role"] for m in out["messages"]][:2] == ["user", "assistant"]
    assert "report" in out


def test_context_report_format_prints_only_the_report(cli: Cli, chat: dict[str, Any]) -> None:
    out = cli.json("context", "chat", "--format", "report")
    assert list(out) == ["report"]


def test_context_prints_a_table_and_report_for_people(cli: Cli, chat: dict[str, Any]) -> None:
    out = cli.ok("context", "chat", "--strategy", "sliding_window", "--budget", "120").stdout
    for header in ("role", "author", "kind", "seq", "tokens", "content"):
        assert header in out
    assert "marker" in out and "truncated" in out and "sliding_window" in out


def test_context_with_an_unknown_strategy_is_a_usage_error(cli: Cli, chat: dict[str, Any]) -> None:
    result = cli("context", "chat", "--strategy", "bogus")
    assert result.exit_code == 2
    assert "--strategy" in one_error_line(result)


def test_context_with_reserved_over_the_budget_is_an_error(cli: Cli, chat: dict[str, Any]) -> None:
    result = cli("context", "chat", "--budget", "100", "--reserved", "100")
    assert result.exit_code == 1
    assert one_error_line(result).startswith("error: reserved_tokens:")


def test_context_of_an_empty_session_is_an_empty_window(cli: Cli) -> None:
    cli.session("--key", "empty")
    out = cli.json("context", "empty")
    assert out["messages"] == [] and out["report"]["messages_in_store"] == 0
    assert "window is empty" in cli.ok("context", "empty").stdout
