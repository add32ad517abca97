"""`turnkeeper mcp` as an MCP host runs it: a real subprocess on a SQLite file, driven by the
MCP SDK's own stdio client.

The tests that need a server of the default project, but not one of their own, share one
(`served`, a second of CPU saved per test): each works on session keys of its own there. The
ones scoped to a project list everything in it, so each has its own server and database.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession

import turnkeeper
from tests.conftest import run_async
from tests.hostile.served import run_cli
from tests.mcp_server.clients import HeldSession, document, error_of, held_stdio, over_stdio

TOOLS = {
    "list_sessions", "get_or_create_session", "append_message", "get_context", "get_history",
    "get_session_stats", "summarize_session", "search_messages",
}  # fmt: skip


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'mcp.db'}"


@dataclass
class Served:
    """A `turnkeeper mcp --db DB` session, shared by this module's tests, and its database."""

    db: str
    mcp: HeldSession


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    db = f"sqlite:///{tmp_path_factory.mktemp('mcp') / 'mcp.db'}"
    with held_stdio("--db", db) as mcp:
        yield Served(db, mcp)


def test_every_tool_and_every_input_is_described_for_the_model(served: Served) -> None:
    async def listed(mcp: ClientSession) -> list[Any]:
        return list((await mcp.list_tools()).tools)

    tools = served.mcp.run(listed)
    assert {tool.name for tool in tools} == TOOLS
    for tool in tools:
        assert len(tool.description or "") > 40, tool.name
        properties = tool.input_schema["properties"]
        assert properties, tool.name
        for name, schema in properties.items():
            assert len(schema.get("description", "")) > 10, f"{tool.name}.{name}"


def test_a_conversation_is_stored_windowed_counted_and_summarized_over_stdio(
    served: Served,
) -> None:
    async def conversation(mcp: ClientSession) -> dict[str, Any]:
        opened = document(await mcp.call_tool("get_or_create_session", {"key": "trip"}))
        again = document(await mcp.call_tool("get_or_create_session", {"key": "trip"}))
        await mcp.call_tool(
            "append_message", {"session": "trip", "role": "system", "content": "Be brief."}
        )
        for turn in range(1, 13):
            role = "user" if turn % 2 else "assistant"
            stored = document(
                await mcp.call_tool(
                    "append_message",
                    {"session": "trip", "role": role, "content": f"turn {turn} about Lisbon"},
                )
            )
        window = document(
            await mcp.call_tool(
                "get_context", {"session": "trip", "strategy": "recent", "keep_recent": 3}
            )
        )
        summary = document(
            await mcp.call_tool(
                "summarize_session", {"session": "trip", "keep_recent": 4, "budget_tokens": 60}
            )
        )
        stats = document(await mcp.call_tool("get_session_stats", {"session": "trip"}))
        history = document(
            await mcp.call_tool(
                "get_history", {"session": "trip", "limit": 2, "newest_first": True}
            )
        )
        listed = document(await mcp.call_tool("list_sessions", {"search": "tri"}))
        transcript = await mcp.read_resource("turnkeeper://sessions/trip/transcript")
        return {
            "opened": opened, "again": again, "stored": stored, "window": window,
            "summary": summary, "stats": stats, "history": history, "listed": listed,
            "transcript": transcript.contents[0].text,
        }  # fmt: skip

    got = served.mcp.run(conversation)
    session_id = got["opened"]["session"]["id"]
    assert got["opened"]["created"] is True and got["again"]["created"] is False
    assert got["again"]["session"]["id"] == session_id
    assert got["stored"]["message"]["seq"] == 13
    window = got["window"]
    assert [m["content"] for m in window["messages"]] == [
        "[Note: 10 older messages not shown]",
        "turn 10 about Lisbon", "turn 11 about Lisbon", "turn 12 about Lisbon",
    ]  # fmt: skip
    assert window["report"]["strategy"] == "recent"
    assert window["report"]["messages_dropped"] == 10
    summary = got["summary"]
    # keep_recent 4 is the most kept verbatim: the window from no cut point overflows, so the
    # cut point moves to the low watermark (docs/concepts/strategies.md, "Cut points")
    covers = summary["summary"]["covers_to_seq"]
    assert 9 <= covers < 13
    assert summary["summary"]["text"].startswith("user: ")
    assert summary["summary"]["method"] == "extractive"
    assert summary["report"]["summarized_seqs"] == [[2, covers]]
    assert got["stats"]["message_count"] == 13
    assert got["stats"]["messages_by_role"] == {"system": 1, "user": 6, "assistant": 6}
    assert [m["seq"] for m in got["history"]["messages"]] == [13, 12]
    assert [s["key"] for s in got["listed"]["sessions"]] == ["trip"]
    lines = str(got["transcript"]).splitlines()
    assert lines[0] == f"session {session_id} (key trip): 13 messages"
    assert lines[1:3] == ["#1 system: Be brief.", "#2 user: turn 1 about Lisbon"]
    with turnkeeper.open(served.db) as tk:  # what the tools said is what is stored
        assert [m.content for m in tk.history("trip")][-1] == "turn 12 about Lisbon"
        assert tk.summaries("trip")[-1].covers_to_seq == covers


def test_bad_input_is_a_tool_error_with_the_command_lines_message(served: Served) -> None:
    db = served.db
    with turnkeeper.open(db) as tk:
        tk.append(tk.get_or_create_session("errand")[0], "user", "hello")

    async def mistakes(mcp: ClientSession) -> list[str]:
        calls = [
            ("get_context", {"session": "errand", "budget_tokens": -5}),
            ("get_context", {"session": "nowhere"}),
            ("get_context", {"session": "errand", "strategy": "everything"}),
            ("append_message", {"session": "errand", "role": "narrator", "content": "x"}),
        ]
        return [error_of(await mcp.call_tool(name, args)) for name, args in calls]

    budget, missing, strategy, role = served.mcp.run(mistakes)
    for message, args in (
        (budget, ["context", "errand", "--budget", "-5"]),
        (missing, ["context", "nowhere"]),
    ):
        cli = run_cli("--db", db, *args)
        assert cli.returncode == 1
        assert cli.stderr.decode().strip() == f"error: {message}"
    assert budget == "budget_tokens: must be a positive whole number, got -5"
    assert missing == "session 'nowhere' not found in project 'default'"
    assert strategy.startswith("strategy: unknown strategy 'everything'; choose one of full,")
    assert role.startswith("role: ")
    with turnkeeper.open(db) as tk:
        assert [m.content for m in tk.history("errand")] == ["hello"]  # nothing stored


def test_with_a_project_the_server_sees_only_that_projects_sessions(db: str) -> None:
    with turnkeeper.open(db) as tk:
        ours = tk.create_session(key="plan", project="alpha")
        theirs = tk.create_session(key="secret", project="beta")
        tk.append(theirs, "user", "beta's private note")

    async def scoped() -> tuple[dict[str, Any], str, str, str]:
        async with over_stdio("--db", db, "--project", "alpha") as mcp:
            listed = document(await mcp.call_tool("list_sessions", {}))
            by_id = error_of(await mcp.call_tool("get_history", {"session": theirs.id}))
            by_key = error_of(await mcp.call_tool("get_context", {"session": "secret"}))
            other = error_of(await mcp.call_tool("list_sessions", {"project": "beta"}))
            return listed, by_id, by_key, other

    listed, by_id, by_key, other = run_async(scoped())
    assert [s["id"] for s in listed["sessions"]] == [ours.id]
    assert by_id == f"session {theirs.id!r} not found in project 'alpha'"
    assert by_key == "session 'secret' not found in project 'alpha'"
    assert other == "this API key belongs to project 'alpha'"


def test_search_finds_what_was_said_in_the_callers_project_only(db: str) -> None:
    with turnkeeper.open(db) as tk:
        ours = tk.create_session(key="trip", project="alpha")
        tk.append(ours, "user", "Which tram goes up to the castle in Lisbon?")
        tk.append(ours, "assistant", "Tram 28 passes close to it.")
        theirs = tk.create_session(key="other", project="beta")
        tk.append(theirs, "user", "Lisbon is beta's secret")

    async def searched() -> tuple[dict[str, Any], dict[str, Any], str]:
        async with over_stdio("--db", db, "--project", "alpha") as mcp:
            found = document(await mcp.call_tool("search_messages", {"query": "lisbon"}))
            none = document(await mcp.call_tool("search_messages", {"query": "secret"}))
            bad = error_of(await mcp.call_tool("search_messages", {"query": "x", "limit": 0}))
            return found, none, bad

    found, none, bad = run_async(searched())
    assert [(hit["session_id"], hit["seq"]) for hit in found["hits"]] == [(ours.id, 1)]
    assert none["hits"] == []
    assert bad.startswith("limit: ")


def test_a_bad_project_is_one_error_line_before_serving(db: str) -> None:
    result = run_cli("mcp", "--db", db, "--project", "no spaces")
    assert result.returncode == 1
    assert result.stderr.decode().startswith("error: project: 'no spaces' is not a valid project")


STRICT_CALLS = [
    ("get_history", {"from_seq": "1"}, "from_seq"),
    ("get_history", {"limit": 2.0}, "limit"),
    ("get_history", {"newest_first": "true"}, "newest_first"),
    ("get_history", {"include_internal": 1}, "include_internal"),
    ("get_context", {"budget_tokens": "500"}, "budget_tokens"),
    ("summarize_session", {"keep_recent": "1"}, "keep_recent"),
    ("append_message", {"content": "x", "internal": "false"}, "internal"),
    ("list_sessions", {"limit": "5"}, "limit"),
    ("search_messages", {"query": "hello", "offset": "0"}, "offset"),
]


def test_a_number_or_a_flag_sent_as_anything_else_is_refused_naming_the_argument(
    served: Served,
) -> None:
    with turnkeeper.open(served.db) as tk:
        tk.append(tk.get_or_create_session("flags")[0], "user", "hello")

    async def calls(mcp: ClientSession) -> list[str]:
        errors = []
        for tool, args, _ in STRICT_CALLS:
            session = {} if tool in ("list_sessions", "search_messages") else {"session": "flags"}
            errors.append(error_of(await mcp.call_tool(tool, session | args)))
        return errors

    for (tool, _, argument), error in zip(STRICT_CALLS, served.mcp.run(calls), strict=True):
        assert f"\n{argument}\n" in error and "validation error" in error, (tool, error)
    with turnkeeper.open(served.db) as tk:
        assert [m.content for m in tk.history("flags")] == ["hello"]  # nothing stored
