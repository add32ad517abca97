"""`turnkeeper import` picks the source (`--from`, or guessed when obvious) and reports bad
records by file and line for each of them; turnkeeper's own JSONL goes through the same path."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Cli
from tests.importers.conftest import FIXTURES

GOOD_JSONL = FIXTURES / "jsonl" / "good.jsonl"
BAD_JSONL = FIXTURES / "jsonl" / "malformed.jsonl"


def test_a_directory_is_guessed_to_be_dagent_files(cli: Cli) -> None:
    report = cli.json("import", str(FIXTURES / "dagent"), "--project", "dagent")
    assert (report["sessions_created"], report["messages_added"]) == (3, 9)
    keys = {s["key"] for s in cli.json("sessions", "list", "--project", "dagent")["sessions"]}
    assert "pm-feature-feat-login" in keys


def test_dagent_import_twice_adds_nothing_and_dry_run_writes_nothing(cli: Cli) -> None:
    tree = str(FIXTURES / "dagent")
    dry = cli.ok("import", "--from", "dagent", tree, "--dry-run")
    assert "Would import 3 new sessions and 9 new messages" in dry.stdout
    assert cli.json("sessions", "list")["sessions"] == []
    cli.ok("import", tree)
    again = cli.json("import", tree)
    assert (again["sessions_created"], again["messages_added"], again["errors"]) == (0, 0, [])


def test_malformed_dagent_files_exit_1_naming_each_file_and_line(cli: Cli) -> None:
    result = cli("import", str(FIXTURES / "dagent-malformed"))
    assert result.exit_code == 1
    errors = result.stderr.splitlines()
    assert len(errors) == 7 and all(line.startswith("error: ") for line in errors)
    assert any(line.endswith("pm-feature-feat-bad.json:15: missing role") for line in errors)
    assert "Imported 1 new session and 2 new messages" in result.stdout


def test_turnkeeper_jsonl_imports_exactly_and_only_once(cli: Cli) -> None:
    first = cli.json("import", "--from", "jsonl", str(GOOD_JSONL))
    assert (first["sessions_created"], first["messages_added"]) == (1, 2)
    session = cli.json("sessions", "show", "support-42", "--project", "shop")["session"]
    assert (session["id"], session["version"]) == ("0e5c3d1a-2b4f-4c6d-8e9f-0a1b2c3d4e5f", 3)
    again = cli.json("import", str(GOOD_JSONL))
    assert (again["sessions_created"], again["messages_added"]) == (0, 0)


def test_malformed_jsonl_lines_are_named_and_the_rest_imports(cli: Cli) -> None:
    result = cli("import", str(BAD_JSONL))
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: {BAD_JSONL}:3: 'wizard' is not a valid Role",
        f"error: {BAD_JSONL}:4: Invalid control character at: line 1 column 141 (char 140)",
    ]
    assert "Imported 1 new session and 2 new messages" in result.stdout


def test_a_json_file_can_be_forced_to_be_read_as_jsonl(cli: Cli, tmp_path: Path) -> None:
    copy = tmp_path / "export.json"
    copy.write_text(GOOD_JSONL.read_text(encoding="utf-8"), encoding="utf-8")
    report = cli.json("import", "--from", "jsonl", str(copy))
    assert report["messages_added"] == 2


def test_source_db_with_a_file_is_a_usage_error(cli: Cli) -> None:
    result = cli("import", str(GOOD_JSONL), "--source-db", "postgresql://x/y")
    assert result.exit_code == 2
    assert "--source-db URL alone" in result.stderr


def test_no_source_at_all_is_a_usage_error(cli: Cli) -> None:
    result = cli("import")
    assert result.exit_code == 2
    assert "missing FILE" in result.stderr


def test_session_files_is_the_documented_name_and_the_older_one_stays_accepted(cli: Cli) -> None:
    tree = str(FIXTURES / "dagent")
    documented = cli.json("import", "--from", "session-files", tree, "--dry-run")
    older = cli.json("import", "--from", "dagent", tree, "--dry-run")
    assert documented == older and documented["sessions_created"] == 3
    shown = cli.ok("import", "--help").stdout
    assert "session-files" in shown and "dagent" not in shown


def test_an_unknown_source_is_a_usage_error_listing_the_documented_ones(cli: Cli) -> None:
    result = cli("import", "--from", "nope", str(GOOD_JSONL))
    assert result.exit_code == 2
    assert "jsonl, session-files, conversation-contexts" in result.stderr
    assert "dagent" not in result.stderr
