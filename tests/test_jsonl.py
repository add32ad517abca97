"""Export → import round-trips every field; importing twice adds nothing; bad lines are named."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Clock, make_sqlite_store
from turnkeeper.config import Settings
from turnkeeper.jsonl import export_sessions, import_sessions
from turnkeeper.service import Turnkeeper
from turnkeeper.types import Usage


def _populate(tk: Turnkeeper) -> list[str]:
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":1}'}}
    a = tk.create_session(key="a", project="p", subject="ticket-1", kind="dev", title="T",
                          phase="plan", metadata={"x": [1, 2]})  # fmt: skip
    tk.append(a, "system", "sys")
    tk.append(a, "user", "Größe? 🚀", author="ana", metadata={"referenced_ids": ["e1"]})
    tk.append(a, "assistant", "", tool_calls=[call], usage=Usage(12, 3, 8, 2))
    tk.append(a, "tool", "result", tool_call_id="c1", internal=True)
    b = tk.create_session(ttl=None)
    tk.archive_session(b)
    return [a.id, b.id]


def test_export_then_import_round_trips_every_field(
    tmp_path: Path, tk: Turnkeeper, settings: Settings, clock: Clock
) -> None:
    ids = _populate(tk)
    out = tmp_path / "export.jsonl"
    with out.open("w", encoding="utf-8") as handle:
        assert export_sessions(tk.store, ids, handle) == (2, 4)
    target = Turnkeeper(make_sqlite_store(tmp_path / "target.db"), settings, clock=clock)
    report = import_sessions(target, out)
    assert (report.sessions_created, report.messages_added, report.errors) == (2, 4, [])
    for session_id in ids:
        assert target.get_session(session_id) == tk.get_session(session_id)
        assert target.history(session_id) == tk.history(session_id)
    again = import_sessions(target, out)
    assert (again.sessions_created, again.messages_added) == (0, 0)
    assert target.get_session(ids[0]) == tk.get_session(ids[0])


def test_dry_run_reports_without_writing(
    tmp_path: Path, tk: Turnkeeper, settings: Settings
) -> None:
    ids = _populate(tk)
    out = tmp_path / "export.jsonl"
    with out.open("w", encoding="utf-8") as handle:
        export_sessions(tk.store, ids, handle)
    target = Turnkeeper(make_sqlite_store(tmp_path / "target.db"), settings)
    report = import_sessions(target, out, dry_run=True)
    assert (report.sessions_created, report.messages_added) == (2, 4)
    assert target.list_sessions().items == ()


def test_malformed_lines_are_named_and_the_rest_imports(
    tmp_path: Path, tk: Turnkeeper, settings: Settings
) -> None:
    ids = _populate(tk)
    out = tmp_path / "export.jsonl"
    with out.open("w", encoding="utf-8") as handle:
        export_sessions(tk.store, ids, handle)
    lines = out.read_text(encoding="utf-8").splitlines()
    lines.insert(2, "{not json")
    lines.insert(4, '{"type": "message", "id": "z"}')
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    target = Turnkeeper(make_sqlite_store(tmp_path / "target.db"), settings)
    report = import_sessions(target, out)
    assert len(report.errors) == 2
    assert report.errors[0].startswith(f"{out}:3: ")
    assert report.errors[1].startswith(f"{out}:5: ")
    assert (report.sessions_created, report.messages_added) == (2, 4)
