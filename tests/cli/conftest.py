"""Fixtures for the CLI tests: a real SQLite file per test, invoked through typer's runner.

The runner's environment points `TURNKEEPER_CONFIG` at a file that does not exist (so no
developer config leaks in), clears `TURNKEEPER_DATABASE_URL`, and widens the terminal so tables
are not cut.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from turnkeeper.cli import app


class Cli:
    """Runs `turnkeeper ARGS… --db URL` in-process and hands back typer's `Result`."""

    def __init__(self, db: str, env: dict[str, str | None]) -> None:
        self.db = db
        self.runner = CliRunner(env=env)

    def __call__(self, *args: str, input: str | None = None, db: str | None = None) -> Result:
        argv = [*args, "--db", db or self.db]
        return self.runner.invoke(app, argv, input=input, catch_exceptions=False)

    def ok(self, *args: str, input: str | None = None, db: str | None = None) -> Result:
        result = self(*args, input=input, db=db)
        assert result.exit_code == 0, result.output
        return result

    def json(self, *args: str, input: str | None = None, db: str | None = None) -> Any:
        """Run with `--json`: exit 0, and stdout is exactly one JSON document."""
        return json.loads(self.ok(*args, "--json", input=input, db=db).stdout)

    def session(self, *options: str) -> dict[str, Any]:
        """Create a session (options as for `sessions create`); its JSON record."""
        record: dict[str, Any] = self.json("sessions", "create", *options)["session"]
        return record

    def add(self, session: str, role: str, text: str, *options: str) -> dict[str, Any]:
        out: dict[str, dict[str, Any]] = self.json("add", session, "--role", role, *options, text)
        return out["message"]


def one_error_line(result: Result) -> str:
    """The single `error: …` line a failed command printed on stderr (nothing on stdout)."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    assert "Traceback" not in result.output
    assert result.stdout == ""
    return lines[0]


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str | None]:
    return {
        "TURNKEEPER_CONFIG": str(tmp_path / "no-such-config.toml"),
        "TURNKEEPER_DATABASE_URL": None,
        "COLUMNS": "200",
    }


@pytest.fixture
def cli(tmp_path: Path, cli_env: dict[str, str | None]) -> Cli:
    return Cli(f"sqlite:///{tmp_path / 't.db'}", cli_env)


def ids(records: Sequence[dict[str, Any]]) -> list[str]:
    return [record["id"] for record in records]
