"""`turnkeeper export` and `import`: JSONL round trips, idempotence, and malformed lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Cli, ids, one_error_line


@pytest.fixture
def populated(cli: Cli) -> list[str]:
    """Three sessions over two projects, one archived, with internal and attributed turns."""
    a = cli.session("--key", "a", "--project", "p1", "--subject", "s", "--kind", "dev",
                    "--title", "T", "--phase", "plan", "--metadata", '{"x": [1, 2]}')  # fmt: skip
    cli.add(a["id"], "system", "sys")
    cli.add(a["id"], "user", "Größe? 🚀", "--author", "ana")
    cli.add(a["id"], "assistant", "thinking", "--internal", "--author", "bot")
    b = cli.session("--key", "b", "--project", "p2", "--ttl", "never")
    cli.add(b["id"], "user", "hi")
    c = cli.session("--project", "p1")
    cli.ok("sessions", "archive", c["id"])
    return [a["id"], b["id"], c["id"]]


def _snapshot(cli: Cli, db: str) -> dict[str, Any]:
    """Everything `--json` shows of a database: sessions and each session's history."""
    sessions = cli.json("sessions", "list", db=db)["sessions"]
    return {
        "sessions": sessions,
        "history": {s["id"]: cli.json("history", s["id"], db=db) for s in sessions},
    }


def test_export_then_import_into_a_fresh_database_is_identical(
    cli: Cli, populated: list[str], tmp_path: Path
) -> None:
    file = tmp_path / "all.jsonl"
    assert cli.json("export", "-o", str(file)) == {
        "file": str(file), "sessions": 3, "messages": 4,
    }  # fmt: skip
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    report = cli.json("import", str(file), db=fresh)
    assert (report["sessions_created"], report["messages_added"], report["errors"]) == (3, 4, [])
    assert _snapshot(cli, fresh) == _snapshot(cli, cli.db)


def test_importing_the_same_file_twice_imports_nothing_the_second_time(
    cli: Cli, populated: list[str], tmp_path: Path
) -> None:
    file = tmp_path / "all.jsonl"
    cli.ok("export", "-o", str(file))
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    cli.ok("import", str(file), db=fresh)
    again = cli.json("import", str(file), db=fresh)
    assert (again["sessions_seen"], again["messages_seen"]) == (3, 4)
    assert (again["sessions_created"], again["messages_added"]) == (0, 0)
    people = cli.ok("import", str(file), db=fresh).stdout
    assert "Imported 0 new sessions and 0 new messages" in people


def test_export_of_named_sessions_writes_only_those(
    cli: Cli, populated: list[str], tmp_path: Path
) -> None:
    file = tmp_path / "some.jsonl"
    cli.ok("export", "a", populated[2], "--project", "p1", "-o", str(file))
    records = [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in records if r["type"] == "session"] == [populated[0], populated[2]]


def test_export_filters_by_project(cli: Cli, populated: list[str], tmp_path: Path) -> None:
    file = tmp_path / "p1.jsonl"
    out = cli.json("export", "--project", "p1", "-o", str(file))
    assert out["sessions"] == 2
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    cli.ok("import", str(file), db=fresh)
    imported = cli.json("sessions", "list", db=fresh)["sessions"]
    assert sorted(ids(imported)) == sorted([populated[0], populated[2]])


def test_export_of_an_unknown_session_fails_and_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    file = tmp_path / "none.jsonl"
    result = cli("export", "ghost", "-o", str(file))
    assert result.exit_code == 1
    assert one_error_line(result).startswith("error: session 'ghost' not found")
    assert list(tmp_path.glob("none.jsonl*")) == []


def test_export_prints_counts_for_people(cli: Cli, populated: list[str], tmp_path: Path) -> None:
    out = cli.ok("export", "-o", str(tmp_path / "x.jsonl")).stdout
    assert "Exported 3 sessions and 4 messages" in out


def test_export_needs_an_output_file(cli: Cli) -> None:
    result = cli("export")
    assert result.exit_code == 2
    assert "--output" in one_error_line(result)


def test_import_names_a_malformed_line_and_still_imports_the_rest(
    cli: Cli, populated: list[str], tmp_path: Path
) -> None:
    file = tmp_path / "all.jsonl"
    cli.ok("export", "-o", str(file))
    lines = file.read_text(encoding="utf-8").splitlines()
    lines.insert(2, "{not json")
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    result = cli("import", str(file), db=fresh)
    assert result.exit_code == 1
    errors = result.stderr.splitlines()
    assert len(errors) == 1 and errors[0].startswith(f"error: {file}:3: ")
    assert "Traceback" not in result.output
    assert "Imported 3 new sessions and 4 new messages" in result.stdout
    assert len(cli.json("sessions", "list", db=fresh)["sessions"]) == 3


def test_import_json_lists_the_errors_too(cli: Cli, tmp_path: Path) -> None:
    file = tmp_path / "bad.jsonl"
    file.write_text('{"type": "nonsense"}\n', encoding="utf-8")
    result = cli("import", str(file), "--json")
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert out["errors"] == [f"{file}:1: unknown record type 'nonsense'"]
    assert result.stderr.splitlines() == [f"error: {file}:1: unknown record type 'nonsense'"]


def test_import_dry_run_counts_without_writing(
    cli: Cli, populated: list[str], tmp_path: Path
) -> None:
    file = tmp_path / "all.jsonl"
    cli.ok("export", "-o", str(file))
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    out = cli.json("import", str(file), "--dry-run", db=fresh)
    assert (out["dry_run"], out["sessions_created"], out["messages_added"]) == (True, 3, 4)
    assert cli.json("sessions", "list", db=fresh)["sessions"] == []
    assert (
        "Would import 3 new sessions" in cli.ok("import", str(file), "--dry-run", db=fresh).stdout
    )


def test_import_of_a_missing_file_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    result = cli("import", str(tmp_path / "missing.jsonl"))
    assert result.exit_code == 2
    assert "missing.jsonl" in one_error_line(result)
