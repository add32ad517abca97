"""`turnkeeper chat` as a real process, against the recording upstream model on loopback. The
conversations it continues are written beforehand in-process (`cli`, on the same database)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cli.conftest import Cli
from tests.cli.test_process import db, env, run
from tests.server.conftest import upstream_server
from tests.server.upstream import Upstream

__all__ = ["db", "env", "upstream_server"]  # the fixtures, re-used


@pytest.fixture
def upstream(upstream_server: tuple[Upstream, str], env: dict[str, str]) -> Upstream:
    """The recording model, reset, and the CLI's environment pointed at it."""
    state, url = upstream_server
    state.mode = "ok"
    state.requests.clear()
    env |= {"TURNKEEPER_LLM_BASE_URL": f"{url}/v1", "TURNKEEPER_LLM_MODEL": "test-model"}
    return state


def test_chat_reaches_the_upstream_openai_api_key_and_openai_base_url_name(
    env: dict[str, str], db: str, upstream: Upstream, upstream_server: tuple[Upstream, str]
) -> None:
    for name in ("TURNKEEPER_LLM_BASE_URL", "TURNKEEPER_LLM_MODEL"):
        del env[name]
    env |= {
        "OPENAI_API_KEY": "sk-from-the-convention",
        "OPENAI_BASE_URL": f"{upstream_server[1]}/v1",
    }
    upstream.headers.clear()
    result = run(env, "chat", "trip", "--db", db, stdin="hello\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "reply 1 to: hello\n"
    assert upstream.headers[0]["authorization"] == "Bearer sk-from-the-convention"


def history(env: dict[str, str], db: str, session: str) -> list[dict[str, Any]]:
    result = run(env, "history", session, "--db", db, "--json")
    assert result.returncode == 0, result.stderr
    messages: list[dict[str, Any]] = json.loads(result.stdout)["messages"]
    return messages


def test_chat_streams_each_reply_and_remembers_the_conversation(
    env: dict[str, str], db: str, upstream: Upstream
) -> None:
    result = run(
        env, "chat", "trip", "--system", "Be brief.", "--db", db, stdin="hello\nand then?\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "reply 1 to: hello\nreply 2 to: and then?\n"
    assert result.stderr.startswith("Created session ")
    first, second = upstream.requests
    assert first["stream"] is True and first["model"] == "test-model"
    assert first["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello"},
    ]
    assert second["messages"][1:] == [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "reply 1 to: hello"},
        {"role": "user", "content": "and then?"},
    ]
    stored = history(env, db, "trip")
    assert [(m["role"], m["content"]) for m in stored][-2:] == [
        ("user", "and then?"), ("assistant", "reply 2 to: and then?"),
    ]  # fmt: skip
    assert stored[-1]["usage"] is not None  # the streamed usage is kept with the reply


def test_chat_sends_the_window_the_strategy_builds(
    env: dict[str, str], db: str, cli: Cli, upstream: Upstream
) -> None:
    cli.ok("add", "long", "--role", "system", "You plan trips.", db=db)
    for n in range(10):
        words = " ".join(f"word{n}-{i}" for i in range(30))
        cli.ok("add", "long", "--role", "user" if n % 2 == 0 else "assistant", words, db=db)
    result = run(
        env, "chat", "long", "--strategy", "sliding_window", "--budget", "150", "--db", db,
        stdin="go\n",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (sent,) = upstream.requests
    assert sent["messages"][0] == {"role": "system", "content": "You plan trips."}
    assert sent["messages"][-1] == {"role": "user", "content": "go"}
    assert 2 < len(sent["messages"]) < 12  # older turns slid out of the budget
    window = run(env, "context", "long", "--strategy", "sliding_window", "--budget", "150",
                 "--db", db, "--json")  # fmt: skip
    assert json.loads(window.stdout)["messages"][-2:] == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "reply 1 to: go"},
    ]


def test_chat_continue_picks_the_most_recent_session(
    env: dict[str, str], db: str, cli: Cli, upstream: Upstream
) -> None:
    cli.ok("add", "older", "first", db=db)
    cli.ok("add", "newer", "second", db=db)
    result = run(env, "chat", "-c", "--db", db, stdin="more\n")
    assert result.returncode == 0, result.stderr
    assert [m["content"] for m in history(env, db, "newer")][-2:] == ["more", "reply 1 to: more"]
    assert len(history(env, db, "older")) == 1


def test_chat_without_a_session_starts_a_new_one(
    env: dict[str, str], db: str, upstream: Upstream
) -> None:
    assert run(env, "chat", "--db", db, stdin="hi\n").returncode == 0
    (session,) = json.loads(run(env, "sessions", "list", "--db", db, "--json").stdout)["sessions"]
    assert session["message_count"] == 2


def test_a_failing_model_is_one_error_line_and_the_question_is_kept(
    env: dict[str, str], db: str, upstream: Upstream
) -> None:
    upstream.mode = "error"
    result = run(env, "chat", "k", "--db", db, stdin="are you there?\n")
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "overloaded" in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert [m["content"] for m in history(env, db, "k")] == ["are you there?"]


def test_chat_continue_with_nothing_to_continue_is_a_usage_error(
    env: dict[str, str], db: str, upstream: Upstream
) -> None:
    result = run(env, "chat", "-c", "--db", db, stdin="")
    assert result.returncode == 2
    assert result.stderr.startswith("error: there is no active session yet; give a SESSION")


def test_slash_commands_are_answered_by_the_chat_never_sent_to_the_model(
    env: dict[str, str], db: str, upstream: Upstream
) -> None:
    result = run(
        env, "chat", "slash", "--db", db,
        stdin="/help\n/frobnicate now\n//etc/hosts is a path\n/session\n/exit\nnever sent\n",
    )  # fmt: skip
    assert result.returncode == 1  # the unknown command was an error
    assert [m["messages"][-1]["content"] for m in upstream.requests] == ["/etc/hosts is a path"]
    assert result.stdout == "reply 1 to: /etc/hosts is a path\n"
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: unknown command /frobnicate; /help lists them"]
    assert all(name in result.stderr for name in ("/help", "/session", "/exit"))
    assert [m["content"] for m in history(env, db, "slash")] == [
        "/etc/hosts is a path", "reply 1 to: /etc/hosts is a path",
    ]  # fmt: skip


def test_a_chat_turn_is_traced_as_coming_from_the_cli(
    env: dict[str, str], db: str, upstream: Upstream
) -> None:
    assert run(env, "chat", "traced", "--db", db, stdin="hello\n").returncode == 0
    trace = run(env, "trace", "traced", "2", "--db", db, "--json")
    assert trace.returncode == 0, trace.stderr
    assert json.loads(trace.stdout)["source"] == "cli"
    shown = run(env, "trace", "traced", "2", "--db", db)
    assert "via cli" in shown.stdout
