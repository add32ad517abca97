"""dagent's session files (new per-session files, old chat.json and nodes/*/session.json)
import with their fields mapped, idempotently, and with bad records named by file and line."""

from __future__ import annotations

import json
from pathlib import Path

from tests.importers.conftest import FIXTURES
from turnkeeper.importers import SourceKind, import_from
from turnkeeper.service import Turnkeeper
from turnkeeper.types import Role, SessionStatus, Usage

TREE = FIXTURES / "dagent"
FEATURE = TREE / ".dagent-worktrees" / "feat-login" / ".dagent"
BAD = FIXTURES / "dagent-malformed" / ".dagent-worktrees" / "feat-bad" / ".dagent"


def _import(tk: Turnkeeper, root: Path, **options: object) -> tuple[int, int, list[str]]:
    report = import_from(tk, SourceKind.SESSION_FILES, root, **options)  # type: ignore[arg-type]
    return report.sessions_created, report.messages_added, report.errors


def test_every_file_kind_becomes_a_session_keyed_by_its_session_id(local: Turnkeeper) -> None:
    assert _import(local, TREE) == (3, 9, [])
    sessions = {s.key: s for s in local.list_sessions().items}
    assert set(sessions) == {
        "pm-feature-feat-login",  # sessions/… and the old chat.json, merged
        "dev-task-feat-login-task-1",  # sessions/…
        "dev-task-feat-login-task-2",  # the old nodes/task-2/session.json
    }
    task = sessions["dev-task-feat-login-task-1"]
    assert (task.kind, task.subject, task.status) == (
        "dev-task",
        "feat-login",
        SessionStatus.ARCHIVED,
    )
    assert task.metadata == {"source": "dagent", "featureId": "feat-login", "taskId": "task-1"}
    old = sessions["dev-task-feat-login-task-2"]
    assert (old.kind, old.subject, old.metadata["taskId"]) == ("dev-task", "feat-login", "task-2")


def test_message_metadata_maps_onto_internal_usage_author_and_metadata(local: Turnkeeper) -> None:
    _import(local, TREE)
    system, tool_turn, last = local.history("dev-task-feat-login-task-1")
    assert system.role is Role.SYSTEM and system.internal
    assert (tool_turn.author, tool_turn.internal, tool_turn.usage) == (
        "dev",
        False,
        Usage(1500, 120),
    )
    assert tool_turn.metadata["toolUse"] == {
        "name": "Read",
        "input": {"path": "src/LoginForm.tsx"},
        "result": "export function LoginForm() {}",
    }
    assert tool_turn.metadata["iteration"] == 1
    assert tool_turn.metadata["dagent_id"] == "0a9d3c70-5b5e-4c1f-9d0a-7e6f5a4b3c02"
    assert "tokens" not in tool_turn.metadata and "internal" not in tool_turn.metadata
    assert tool_turn.created_at.isoformat() == "2026-01-11T08:03:00+00:00"
    assert last.usage is None


def test_an_old_chat_file_comes_before_its_successors_messages(local: Turnkeeper) -> None:
    _import(local, TREE)
    history = local.history("pm-feature-feat-login")
    assert [m.content[:14] for m in history] == [
        "You are the PM",
        "Drafted a plan",
        "Plan feature: ",
        "Three tasks: f",
    ]
    assert [m.seq for m in history] == [1, 2, 3, 4]
    session = local.get_session("pm-feature-feat-login")
    assert session.created_at == history[0].created_at  # the oldest record, not the new file's
    assert session.usage_input_tokens == 812


def test_importing_twice_adds_nothing(local: Turnkeeper) -> None:
    _import(local, TREE)
    before = {s.id: local.history(s) for s in local.list_sessions().items}
    assert _import(local, TREE) == (0, 0, [])
    assert {s.id: local.history(s) for s in local.list_sessions().items} == before


def test_a_dry_run_counts_and_writes_nothing(local: Turnkeeper) -> None:
    assert _import(local, TREE, dry_run=True) == (3, 9, [])
    assert local.list_sessions().items == ()


def test_a_session_file_that_grew_adds_only_its_new_messages(
    local: Turnkeeper, fixture_copy: Path
) -> None:
    tree = fixture_copy / "dagent"
    path = tree / ".dagent-worktrees/feat-login/.dagent/nodes/task-2/session.json"
    _import(local, tree)
    document = json.loads(path.read_text(encoding="utf-8"))
    document["messages"].append(
        {"id": "b7e1d2c3-0000-4a4a-8b8b-000000000003", "timestamp": "2026-01-09T18:20:00.000Z",
         "role": "assistant", "content": "Iteration 3: done.", "metadata": {"agentType": "dev"}}
    )  # fmt: skip
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    assert _import(local, tree) == (0, 1, [])
    history = local.history("dev-task-feat-login-task-2")
    assert [(m.seq, m.content) for m in history][-1] == (3, "Iteration 3: done.")


def test_one_session_file_imports_on_its_own_into_the_given_project(local: Turnkeeper) -> None:
    path = FEATURE / "sessions" / "pm-feature-feat-login.json"
    assert _import(local, path, project="dagent") == (1, 2, [])
    (session,) = local.list_sessions(project="dagent").items
    assert session.key == "pm-feature-feat-login"


def test_malformed_records_are_named_by_file_and_line_and_the_rest_imports(
    local: Turnkeeper,
) -> None:
    created, added, errors = _import(local, BAD.parent.parent.parent)
    # Errors in reading come first, then those found validating each session's messages.
    assert (created, added) == (1, 2)
    session_file = BAD / "sessions" / "pm-feature-feat-bad.json"
    assert errors == [
        f"{BAD / 'chat.json'}:1: no messages array (expected 'messages' or 'entries')",
        f"{BAD / 'nodes/t9/session.json'}:10: not valid JSON (Invalid control character,"
        " column 37)",
        f"{session_file}:15: missing role",
        f"{session_file}:20: timestamp 'yesterday' is not an ISO 8601 time",
        f"{session_file}:26: a message must be a JSON object",
        f"{BAD / 'sessions/qa-task-feat-bad-t1.json'}:1: createdAt 'the day before' is not an"
        " ISO 8601 time",
        f"{session_file}:27: role: unknown role 'narrator'; choose one of system, user,"
        " assistant, tool",
    ]
    assert [m.content for m in local.history("pm-feature-feat-bad")] == [
        "First, a good message.",
        "Last, another good message.",
    ]
