"""Fixtures for the CLI tests: a real SQLite file per test, invoked through typer's runner.

The click command behind the `turnkeeper` app is built once (`COMMAND`): typer's own
`CliRunner.invoke` rebuilds it from every command's signature on each call, which was half of
these tests' time. `Cli` runs the one command in the runner's isolation, as `invoke` would.

The runner's environment points `TURNKEEPER_CONFIG` at a file that does not exist (so no
developer config leaks in), clears `TURNKEEPER_DATABASE_URL`, and widens the terminal so tables
are not cut.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

from turnkeeper.cli import app

COMMAND = typer.main.get_command(app)
"""The `turnkeeper` command as click runs it, built from the app once for every test."""


class Cli:
    """Runs `turnkeeper ARGS… --db URL` in-process and hands back typer's `Result`."""

    def __init__(self, db: str, env: dict[str, str | None]) -> None:
        self.db = db
        self.runner = CliRunner(env=env)

    def __call__(self, *args: str, input: str | None = None, db: str | None = None) -> Result:
        """`CliRunner.invoke(app, argv, catch_exceptions=False)`, over the command built once:
        the same isolation (stdin, stdout and stderr, environment), the same `Result`."""
        argv = [*args, "--db", db or self.db]
        with self.runner.isolation(input=input) as (stdout, stderr, output):
            code = 0
            try:
                COMMAND.main(args=argv, prog_name=self.runner.get_default_prog_name(COMMAND))
            except SystemExit as exit:  # the root command's `main` ends with its status
                code = int(exit.code or 0)
            sys.stdout.flush()
            sys.stderr.flush()
            streams = stdout.getvalue(), stderr.getvalue(), output.getvalue()
        return Result(self.runner, *streams, return_value=None, exit_code=code, exception=None)

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
