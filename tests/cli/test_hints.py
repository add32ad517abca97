"""Every command the product prints as a hint runs as printed (in a real process).

The web UI's `<code>turnkeeper …</code>` hints, the "more sessions" cursor line of
`sessions list`, and the `(see '… --help')` pointer of a usage error.
"""

from __future__ import annotations

import html
import re
import shlex
from pathlib import Path

import pytest

from tests.cli import seeding
from tests.cli.test_process import ROOT, env, run

__all__ = ["env"]  # the fixture, re-used

TEMPLATES = ROOT / "src" / "turnkeeper" / "server" / "ui" / "templates"
UI_HINTS = sorted(
    {
        html.unescape(code)
        for template in TEMPLATES.glob("*.html")
        for code in re.findall(r"<code>(turnkeeper [^<]*)</code>", template.read_text())
    }
)


def test_the_ui_has_hints_to_check() -> None:
    assert 'turnkeeper add my-chat "Hello"' in UI_HINTS


@pytest.mark.parametrize("hint", UI_HINTS)
def test_each_command_the_web_ui_suggests_runs(
    env: dict[str, str], tmp_path: Path, hint: str
) -> None:
    env["TURNKEEPER_DATABASE_URL"] = f"sqlite:///{tmp_path / 'hint.db'}"
    result = run(env, *shlex.split(hint)[1:])
    assert result.returncode == 0, result.stderr
    assert "error" not in result.stderr


def test_the_more_sessions_hint_continues_the_list(env: dict[str, str], tmp_path: Path) -> None:
    env["TURNKEEPER_DATABASE_URL"] = db = f"sqlite:///{tmp_path / 'hint.db'}"
    for key in ("older-key", "newer-key"):
        seeding.add(db, key, "hi")  # in-process: the listing is under test
    first = run(env, "sessions", "list", "--limit", "1")
    (line,) = [line for line in first.stdout.splitlines() if line.startswith("More sessions")]
    more = line.removeprefix("More sessions: add ").split()
    second = run(env, "sessions", "list", "--limit", "1", *more)
    assert second.returncode == 0, second.stderr
    assert "newer-key" in first.stdout and "older-key" not in first.stdout
    assert "older-key" in second.stdout and "newer-key" not in second.stdout


def test_the_usage_error_pointer_names_a_help_that_runs(env: dict[str, str]) -> None:
    failed = run(env, "sessions", "show")
    (pointer,) = re.findall(r"\(see '([^']+)'\)", failed.stderr)
    shown = run(env, *shlex.split(pointer)[1:])
    assert shown.returncode == 0 and "Usage: turnkeeper sessions show" in shown.stdout
