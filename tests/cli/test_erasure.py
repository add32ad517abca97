"""`turnkeeper erase` and `turnkeeper hold` as real processes (`python -m turnkeeper`) on a real
SQLite file: the receipt on stdout, one error line and a non-zero status for bad input, and an
old export that would bring an erased session back refused by FILE:LINE. The sessions a test
erases are written in-process (`tests.cli.seeding`): only the commands under test are processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli import seeding

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 't.db'}"


@pytest.fixture
def tk(tmp_path: Path, db: str) -> Any:
    """`tk(*args)`: run `python -m turnkeeper ARGS --db <a file of this test>`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TURNKEEPER_", "OPENAI_"))}
    env |= {
        "PYTHONPATH": str(ROOT / "src"),
        "TURNKEEPER_CONFIG": str(tmp_path / "no-such-config.toml"),
        "COLUMNS": "200",
    }

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "turnkeeper", *args, "--db", db],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )

    return run


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def _json(result: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(_ok(result))


def _error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result
    assert result.stdout == "" and "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ")
    return line


def _session(db: str, project: str, subject: str, text: str) -> str:
    """A session of `project` about `subject` holding one user message, `text`: what
    `sessions create --project P --subject S` then `add ID TEXT` make, written in-process."""
    session_id = seeding.create(db, project=project, subject=subject)
    seeding.add(db, session_id, text)
    return session_id


def test_erase_prints_the_receipt_and_a_hold_keeps_its_session(
    tk: Any, db: str, tmp_path: Path
) -> None:
    held = _session(db, "clinic", "patient-7", "held words")
    gone = _session(db, "billing", "patient-7", "gone words")
    other = _session(db, "clinic", "patient-8", "other words")
    export = tmp_path / "before.jsonl"
    _ok(tk("export", "-o", str(export)))
    hold = _json(tk("hold", held, "--json"))
    assert hold["held"] is True and hold["hold"]["session_id"] == held
    assert [h["session_id"] for h in _json(tk("hold", "--list", "--json"))] == [held]
    preview = _json(tk("erase", "--subject", "patient-7", "--dry-run", "--json"))
    assert (preview["dry_run"], preview["sessions"], preview["held"]) == (True, [gone], [held])
    people = _ok(tk("erase", "--subject", "patient-7"))
    assert "Erased 1 session (1 message," in people and gone in people
    assert f"Held by a legal hold, not erased: {held}" in people
    assert "was erased at" in _error(tk("history", gone))
    assert "was erased at" in _error(tk("add", gone, "a late append"))
    assert _json(tk("hold", held, "--release", "--json"))["held"] is False
    receipt = _json(tk("erase", "--session", held, "--json"))
    assert (receipt["sessions"], receipt["messages"], receipt["session"]) == ([held], 1, held)
    assert _json(tk("erase", "--session", held, "--json"))["already_erased"] == [held]
    # the export holds both erased sessions: refused by FILE:LINE, the rest imported
    refused = tk("import", str(export))
    assert refused.returncode == 1
    lines = [line for line in refused.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 2 and all(f"{export}:" in line and "erased" in line for line in lines)
    assert all("--allow-erased" in line for line in lines)
    assert "was erased at" in _error(tk("history", held))
    restored = _json(tk("import", str(export), "--allow-erased", "--json"))
    assert restored["errors"] == [] and restored["sessions_created"] == 2
    assert [m["content"] for m in _json(tk("history", held, "--json"))["messages"]] == [
        "held words"
    ]
    assert len(_json(tk("history", other, "--json"))["messages"]) == 1


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ((), "subject"),
        (("--subject", ""), "subject"),
        (("--subject", "x" * 300), "subject"),
        (("--subject", "patient-7", "--session", "s"), "session"),
        (("--project", "../up"), "project"),
    ],
)
def test_bad_erase_input_is_one_line_naming_the_field(
    tk: Any, db: str, args: tuple[str, ...], field: str
) -> None:
    kept = _session(db, "clinic", "patient-7", "kept")
    assert _error(tk("erase", *args)).startswith(f"error: {field}")
    assert len(_json(tk("history", kept, "--json"))["messages"]) == 1


def test_a_held_session_is_not_deleted_or_reset_one_line_each(tk: Any, db: str) -> None:
    held = _session(db, "clinic", "patient-7", "kept")
    _ok(tk("hold", held))
    for command in (("sessions", "delete", held, "--yes"), ("sessions", "reset", held)):
        assert "legal hold" in _error(tk(*command))
    assert len(_json(tk("history", held, "--json"))["messages"]) == 1


def test_unknown_sessions_and_hold_targets_are_one_line_each(tk: Any) -> None:
    assert "not found" in _error(tk("erase", "--session", "no-such-session"))
    assert _error(tk("hold")).startswith("error: session")
    assert "not found" in _error(tk("hold", "no-such-session"))
    usage = tk("hold", "--list", "--release")
    assert usage.returncode == 2 and "Traceback" not in usage.stderr
    held = _json(tk("hold", "--project", "clinic", "--json"))
    assert held["hold"] == {
        "project": "clinic",
        "session_id": None,
        "held_at": held["hold"]["held_at"],
    }
