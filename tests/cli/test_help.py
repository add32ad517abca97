"""`--help` reads like gh's and git's: no `<bool>`/`<str>`/`<list[str]>` type tags, usage lines
with plain metavars, and docstring paragraphs that re-flow whole at any width."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from turnkeeper.cli import app


def _command_paths() -> list[tuple[str, ...]]:
    root = typer.main.get_command(app)
    paths: list[tuple[str, ...]] = [()]
    for name, command in getattr(root, "commands", {}).items():
        paths.append((name,))
        paths += [(name, sub) for sub in getattr(command, "commands", {})]
    return paths


COMMANDS = _command_paths()


def test_every_command_is_checked() -> None:
    assert {("add",), ("sessions", "list"), ("gc",), ()} <= set(COMMANDS)
    assert len(COMMANDS) > 20


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "turnkeeper")
def test_help_shows_no_type_tags_and_plain_usage(path: tuple[str, ...]) -> None:
    result = CliRunner(env={"COLUMNS": "80"}).invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert re.findall(r"(?<!_)<\w[\w\[\], |]*>", result.stdout) == []  # (not tk_<id>_)
    usage = next(line for line in result.stdout.splitlines() if "Usage:" in line)
    assert "{" not in usage and "[[" not in usage, usage


def test_a_docstring_paragraph_flows_as_one() -> None:
    wide = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["context", "--help"]).stdout
    assert "and report how it was built. With --agent, the window is that agent's view" in wide


def test_markdown_keeps_angle_brackets_in_code() -> None:
    shown = CliRunner(env={"COLUMNS": "120"}).invoke(app, ["keys", "revoke", "--help"]).stdout
    assert "tk_<id>_…" in shown
