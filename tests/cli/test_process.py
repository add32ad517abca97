"""The CLI as a real process: `python -m turnkeeper` and the declared console-script entry point.

These prove what the in-process runner cannot: the exit status the shell sees, that stderr
carries one clean line and no traceback, and that nothing but the JSON document reaches stdout.
The data a test's command works on is written in-process (`tests.cli.seeding`) unless writing it
is what the test checks: a process start costs about 0.55 s of CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.cli import seeding

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    values = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("TURNKEEPER_", "OPENAI_", "ANTHROPIC_"))
    }
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), values.get("PYTHONPATH")]))
    values |= {"PYTHONPATH": path, "TURNKEEPER_CONFIG": str(tmp_path / "no-such-config.toml")}
    return values


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 't.db'}"


def run(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "turnkeeper", *args],
        input=stdin, capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip


def test_success_exits_0_with_one_json_document_on_stdout(env: dict[str, str], db: str) -> None:
    made = run(env, "sessions", "create", "--key", "k", "--db", db, "--json")
    assert made.returncode == 0, made.stderr
    added = run(env, "add", "k", "--role", "user", "--db", db, "--json", stdin="hi from a pipe\n")
    assert added.returncode == 0, added.stderr
    context = run(env, "context", "k", "--db", db, "--json")
    assert context.returncode == 0 and context.stderr == ""
    document = json.loads(context.stdout)  # nothing else on stdout: not even log events
    assert document["messages"] == [{"role": "user", "content": "hi from a pipe"}]
    assert json.loads(made.stdout)["session"]["key"] == "k"


def test_an_unknown_session_exits_1_with_one_line_and_no_traceback(
    env: dict[str, str], db: str
) -> None:
    result = run(env, "history", "x", "--db", db, "--json")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == ["error: session 'x' not found in project 'default'"]


def test_a_usage_error_exits_2_with_one_line(env: dict[str, str], db: str) -> None:
    result = run(env, "context", "k", "--strategy", "bogus", "--db", db)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: Invalid value for '--strategy'")
    assert "Traceback" not in result.stderr


def test_delete_without_yes_is_refused_without_a_terminal(env: dict[str, str], db: str) -> None:
    seeding.create(db, key="k")
    result = run(env, "sessions", "delete", "k", "--db", db, stdin="y\n")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: refusing to delete without confirmation: pass --yes"
        " (see 'turnkeeper sessions delete --help')"
    ]


def test_db_option_overrides_the_environment(env: dict[str, str], db: str, tmp_path: Path) -> None:
    env["TURNKEEPER_DATABASE_URL"] = f"sqlite:///{tmp_path / 'from-env.db'}"
    run(env, "sessions", "create", "--key", "in-env")
    run(env, "sessions", "create", "--key", "in-option", "--db", db)
    from_env = json.loads(run(env, "sessions", "list", "--json").stdout)["sessions"]
    from_option = json.loads(run(env, "sessions", "list", "--db", db, "--json").stdout)["sessions"]
    assert [s["key"] for s in from_env] == ["in-env"]
    assert [s["key"] for s in from_option] == ["in-option"]


def test_a_bad_database_url_is_one_error_line(env: dict[str, str]) -> None:
    result = run(env, "sessions", "list", "--db", "mysql://nowhere/db")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: database_url: unsupported scheme 'mysql'; use sqlite:///path/to/file.db,"
        " postgresql://user@host/db or memory://"
    ]


def test_help_exits_0(env: dict[str, str]) -> None:
    result = run(env, "--help")
    assert result.returncode == 0
    assert "sessions" in result.stdout and "context" in result.stdout


def test_the_declared_console_script_entry_point_runs_the_cli(env: dict[str, str], db: str) -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["turnkeeper"].split(":")
    code = f"import sys; sys.argv[0] = 'turnkeeper'; from {module} import {function}; {function}()"
    ok = subprocess.run(
        [sys.executable, "-c", code, "stats", "--db", db, "--json"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == {"projects": []}
    missing = subprocess.run(
        [sys.executable, "-c", code, "stats", "nope", "--db", db],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert missing.returncode == 1
    assert missing.stderr.startswith("error: session 'nope' not found")


def test_version_prints_the_package_version(env: dict[str, str]) -> None:
    from turnkeeper import __version__

    for flag in ("--version", "-V"):
        result = run(env, flag)
        assert (result.returncode, result.stdout, result.stderr) == (
            0, f"turnkeeper {__version__}\n", "",
        )  # fmt: skip


def test_global_options_before_the_command_apply_to_it(env: dict[str, str], db: str) -> None:
    made = run(env, "--db", db, "--json", "sessions", "create", "--key", "early")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["session"]["key"] == "early"
    listed = run(env, "--db", db, "sessions", "list", "--json")
    assert [s["key"] for s in json.loads(listed.stdout)["sessions"]] == ["early"]
    people = run(env, "--db", db, "sessions", "list")
    assert people.returncode == 0 and "early" in people.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(people.stdout)


def test_the_commands_own_db_wins_over_the_global_one(
    env: dict[str, str], db: str, tmp_path: Path
) -> None:
    other = f"sqlite:///{tmp_path / 'other.db'}"
    run(env, "--db", other, "sessions", "create", "--key", "after", "--db", db)
    mine = json.loads(run(env, "sessions", "list", "--db", db, "--json").stdout)["sessions"]
    theirs = json.loads(run(env, "--json", "sessions", "list", "--db", other).stdout)["sessions"]
    assert ([s["key"] for s in mine], theirs) == (["after"], [])


def test_delete_with_global_json_needs_no_confirmation(env: dict[str, str], db: str) -> None:
    seeding.create(db, key="k")
    result = run(env, "--json", "--db", db, "sessions", "delete", "k")
    assert result.returncode == 0, result.stderr
    assert "deleted" in json.loads(result.stdout)


@pytest.mark.parametrize("columns", ["80", "50"])
def test_sessions_list_never_splits_an_id_or_a_key(
    env: dict[str, str], db: str, columns: str
) -> None:
    keys = ["support-ticket-4711-follow-up", "k", "x" * 45]
    for key in keys:
        seeding.add(db, key, "hi")
    env["COLUMNS"] = columns
    listed = run(env, "sessions", "list", "--db", db)
    ids = [
        s["id"]
        for s in json.loads(run(env, "sessions", "list", "--db", db, "--json").stdout)["sessions"]
    ]
    rows = listed.stdout.splitlines()
    for key, session_id in zip(reversed(keys), ids, strict=True):
        assert any(row.split()[:2] == [session_id, key] for row in rows), listed.stdout
    if columns == "80":  # what does not fit is left out whole, from the right
        assert rows[1].split() == ["id", "key", "status"]


def test_serve_takes_the_global_db_too(env: dict[str, str]) -> None:
    result = run(env, "--db", "mysql://nowhere/db", "serve", "--port", "0")
    assert result.returncode != 0  # (how serve reports a failed start is serve's business)
    assert "unsupported scheme 'mysql'" in result.stderr


def test_a_session_of_another_project_is_said_to_be_there(env: dict[str, str], db: str) -> None:
    made = run(
        env, "sessions", "create", "--key", "support-42", "--project", "acme", "--db", db, "--json"
    )
    assert made.returncode == 0, made.stderr
    session_id = json.loads(made.stdout)["session"]["id"]
    hint = "it exists in project 'acme'; pass --project acme"
    for args in (("history", "support-42"), ("history", session_id, "--project", "beta")):
        result = run(env, *args, "--db", db)
        assert result.returncode == 1 and result.stdout == ""
        (line,) = result.stderr.splitlines()
        assert line.startswith(f"error: session '{args[1]}' not found in project ")
        assert line.endswith(hint)
    shown = run(env, "history", "support-42", "--project", "acme", "--db", db)
    assert shown.returncode == 0, shown.stderr  # the hint's advice works


def test_the_window_tags_the_internal_messages_it_sends(env: dict[str, str], db: str) -> None:
    seeding.add(db, "dinner", "Book a table.")
    seeding.add(
        db, "dinner", "checked availability", role="assistant", internal=True, author="tool"
    )
    seeding.add(db, "dinner", "For two.")
    shown = run(env, "context", "dinner", "--db", db)
    assert shown.returncode == 0, shown.stderr
    lines = {line for line in shown.stdout.splitlines() if "│" not in line}
    (noted,) = [line for line in lines if "checked availability" in line]
    assert "internal" in noted
    assert not any("internal" in line for line in lines if "Book a table" in line)


def test_counts_of_one_read_in_the_singular(env: dict[str, str], db: str, tmp_path: Path) -> None:
    seeding.add(db, "solo", "hi")
    exported = run(env, "export", "--output", str(tmp_path / "one.jsonl"), "--db", db)
    assert exported.returncode == 0, exported.stderr
    assert "Exported 1 session and 1 message to " in exported.stdout
    other = f"sqlite:///{tmp_path / 'other.db'}"
    imported = run(env, "import", str(tmp_path / "one.jsonl"), "--db", other)
    assert "Imported 1 new session and 1 new message (1 session and 1 message read)." in (
        imported.stdout
    )
    deleted = run(env, "sessions", "delete", "solo", "--yes", "--db", db)
    assert deleted.stdout.startswith("Deleted session ") and "its 1 message." in deleted.stdout
    assert "sessions" not in exported.stdout + imported.stdout + deleted.stdout


def test_history_without_a_session_shows_the_latest_one(env: dict[str, str], db: str) -> None:
    empty = run(env, "history", "--db", db)
    assert empty.returncode == 2
    assert empty.stderr.splitlines()[0].startswith("error: there is no session yet")
    for key in ("older", "newer", "older"):  # the older one is active again, last
        seeding.add(db, key, f"to {key}")
    latest = json.loads(run(env, "history", "--db", db, "--json").stdout)
    assert [m["content"] for m in latest["messages"]] == ["to older", "to older"]
    help_text = run(env, "history", "--help").stdout
    assert "[SESSION]" in help_text
