"""turnkeeper's command line (`turnkeeper …`, or `python -m turnkeeper …`).

`main()` is the console-script entry point; `app` is the typer app (for `typer.testing`).
Importing the command modules registers their commands on `app`.

The command line is the `cli` extra (typer and rich), as httpx does it, so the library stays
light: without it, `turnkeeper` says what to install instead of failing on an import.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from turnkeeper import telemetry

CLI_PACKAGES = frozenset({"typer", "click", "rich"})
MISSING_CLI = "error: the turnkeeper command line is not installed: pip install 'turnkeeper[cli]'"

COMMAND_MODULES = (
    "admin",
    "agents",
    "branches",
    "chat",
    "encryption",
    "erasure",
    "mcp",
    "messages",
    "search",
    "server",
    "sessions",
    "trace",
    "transfer",
)
"""The modules of `turnkeeper.cli` that declare commands: importing one registers its commands
on `app`."""

try:
    from turnkeeper.cli.app import app

    for _module in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{_module}")
except ModuleNotFoundError as exc:  # the library without its `cli` extra
    if (exc.name or "").split(".")[0] not in CLI_PACKAGES:
        raise
    app: Any = None  # type: ignore[no-redef]

__all__ = ["app", "main"]


def main() -> None:
    """Run the CLI on `sys.argv` and exit with its status (0 ok, 1 error, 2 usage error)."""
    if app is None:
        print(MISSING_CLI, file=sys.stderr)
        raise SystemExit(1)
    telemetry.configure()  # traces where OTEL_EXPORTER_OTLP_* say, if they say
    app(prog_name="turnkeeper")
