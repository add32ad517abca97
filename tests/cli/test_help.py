"""`--help` reads like gh's and git's: no `<bool>`/`<str>`/`<list[str]>` type tags, usage lines
with plain metavars, and docstring paragraphs that re-flow whole at any width."""

from __future__ import annotations

import os
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


def _leaves(command: object, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    subcommands = getattr(command, "commands", {})
    if not subcommands:
        return [(path, command)]
    return [leaf for name, sub in subcommands.items() for leaf in _leaves(sub, (*path, name))]


def test_every_command_that_prints_takes_db_and_json_after_its_own_options() -> None:
    """`command` adds them to the options a command declares; the commands that open their
    context themselves declare them last too. Only the long-running ones take no --json."""
    without_json = set()
    for path, command in _leaves(typer.main.get_command(app)):
        names = [param.name for param in getattr(command, "params", []) if param.name != "help"]
        if "json_output" in names:
            assert names[-2:] == ["db", "json_output"], path
        else:
            assert names[-1] == "db", path
            without_json.add(path)
    assert without_json == {("chat",), ("mcp",), ("serve",)}


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


def test_commands_are_listed_what_a_user_needs_first() -> None:
    from tests.cli.test_process import run  # the CLI as a real process

    env = {**os.environ, "COLUMNS": "120", "TURNKEEPER_CONFIG": os.devnull}
    shown = run(env, "--help").stdout
    listed = re.findall(r"^│ ([a-z][a-z-]+) {2,}", shown, flags=re.MULTILINE)
    root = typer.main.get_command(app)
    assert sorted(listed) == sorted(getattr(root, "commands", {}))  # each once
    assert listed[:4] == ["sessions", "add", "history", "context"]
    assert listed.index("gc") > listed.index("stats") > listed.index("export")
    assert listed.index("demo") < listed.index("serve")


@pytest.mark.parametrize("columns", ["80", "100", "140"])
def test_choices_are_listed_as_whole_words_at_any_width(columns: str) -> None:
    from tests.cli.test_process import run

    env = {**os.environ, "COLUMNS": columns, "TURNKEEPER_CONFIG": os.devnull}
    for command in (["context"], ["chat"], ["sessions", "list"], ["serve"]):
        shown = run(env, *command, "--help").stdout
        words = set(re.findall(r"[\w-]+", shown))
        assert "|" not in "".join(line for line in shown.splitlines() if "Usage" not in line)
        if command[0] in ("context", "chat"):
            assert {"full", "recent", "sliding_window", "truncate", "summarize"} <= words
