"""turnkeeper's command line (`turnkeeper …`, or `python -m turnkeeper …`).

`main()` is the console-script entry point; `app` is the typer app (for `typer.testing`).
Importing the command modules registers their commands on `app`.
"""

from __future__ import annotations

from turnkeeper.cli import admin, agents, chat, messages, server, sessions, transfer
from turnkeeper.cli.app import app

__all__ = ["app", "main"]

_COMMAND_MODULES = (admin, agents, chat, messages, server, sessions, transfer)


def main() -> None:
    """Run the CLI on `sys.argv` and exit with its status (0 ok, 1 error, 2 usage error)."""
    app(prog_name="turnkeeper")
