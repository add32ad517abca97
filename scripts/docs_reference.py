"""The generated pages of the documentation site, made from the code at every build.

An mkdocs hook (`mkdocs.yml` names it), so there is no committed copy to go stale:

- `reference/cli.md`: every command's `--help`, as the `turnkeeper` command prints it;
- `reference/openapi.json`: the HTTP service's OpenAPI schema, as `/openapi.json` serves it;
- `reference/http.md`: every route of that schema, grouped by tag, linking to the schema.

Hidden commands and options (accepted aliases of older names) stay out, as they do in `--help`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

OLDER_CLIENTS = "/api/v1/"  # routes kept for an older service's clients (compatibility.md)
HELP_WIDTH = "100"  # columns of the help text: as a terminal of that width prints it


def on_files(files: Files, config: MkDocsConfig) -> Files:
    schema = openapi_schema()
    pages = {
        "reference/cli.md": cli_page(),
        "reference/openapi.json": json.dumps(schema, indent=2, ensure_ascii=False) + "\n",
        "reference/http.md": http_page(schema),
    }
    for path, content in pages.items():
        files.append(File.generated(config, path, content=content))
    return files


def cli_page() -> str:
    """Each command's help, in the order `turnkeeper --help` lists them."""
    import typer.main

    from turnkeeper.cli import app

    root = typer.main.get_command(app)
    lines = [
        "# CLI reference",
        "",
        "Generated from the `turnkeeper` command at every build of this site: each section is",
        "what `turnkeeper … --help` prints. The [command line](../interfaces/cli.md) page shows",
        "them at work.",
        "",
    ]
    for path in _commands(root, ()):
        name = " ".join(("turnkeeper", *path))
        lines += [f"## `{name}`", "", "```text", _help_of(path).rstrip(), "```", ""]
    return "\n".join(lines)


def _commands(command: Any, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """The path of `command` and of every visible command under it, in help order (a group is
    whatever lists commands: typer ships click's classes under its own name)."""
    yield path
    if hasattr(command, "list_commands"):
        context = command.make_context("turnkeeper", [], resilient_parsing=True)
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            if sub is not None and not sub.hidden:
                yield from _commands(sub, (*path, name))


def _help_of(path: tuple[str, ...]) -> str:
    """`turnkeeper PATH --help`, run through the real entry point's app without colours."""
    from typer.testing import CliRunner

    from turnkeeper.cli import app

    # COLUMNS only: typer reads TERMINAL_WIDTH once, when its help module is first imported, so
    # setting it here would fix every later help of the process at this width.
    environment = {"COLUMNS": HELP_WIDTH, "NO_COLOR": "1"}
    result = CliRunner().invoke(app, [*path, "--help"], env=environment, prog_name="turnkeeper")
    if result.exit_code != 0:
        raise RuntimeError(f"`turnkeeper {' '.join(path)} --help` failed: {result.output}")
    return result.output


def openapi_schema() -> dict[str, Any]:
    """The schema the service serves at `/openapi.json` (no database is opened for it)."""
    os.environ.setdefault("TURNKEEPER_CONFIG", os.devnull)  # the defaults, not this machine's
    from turnkeeper.config import load_settings
    from turnkeeper.server.app import create_app

    app = create_app(load_settings(database_url="memory://"), sweep=False)
    return app.openapi()


def http_page(schema: dict[str, Any]) -> str:
    """A table of the routes per tag: method, path, summary."""
    by_tag: dict[str, list[tuple[str, str, str]]] = {}
    older = 0
    for path, operations in schema["paths"].items():
        if path.startswith(OLDER_CLIENTS):
            older += len(operations)
            continue
        for method, operation in operations.items():
            tag = (operation.get("tags") or ["other"])[0]
            described = operation.get("description") or operation.get("summary", "")
            summary = described.split("\n\n")[0].replace("\n", " ").replace("|", "\\|")
            if operation.get("deprecated"):
                summary += " (deprecated)"
            by_tag.setdefault(tag, []).append((method.upper(), path, summary))
    lines = [
        "# HTTP routes",
        "",
        f"Generated from the service's OpenAPI schema (version {schema['info']['version']}) at",
        "every build of this site. The whole schema, with every field, parameter and problem",
        "response, is [openapi.json](openapi.json) (a running service serves it at",
        "`/openapi.json`, and its interactive form at `/docs`). The [HTTP API](../interfaces/http.md)",
        "page explains the routes at work.",
        "",
    ]
    for tag in sorted(by_tag):
        lines += [f"## {tag}", "", "| method | path | what it does |", "|---|---|---|"]
        lines += [f"| {m} | `{p}` | {s} |" for m, p, s in by_tag[tag]]
        lines.append("")
    if older:
        lines += [
            "## Routes of older clients",
            "",
            f"{older} routes under `{OLDER_CLIENTS}` keep the paths and fields of a service",
            "turnkeeper replaces, so its clients carry over: see [compatibility](../compatibility.md).",
            "",
        ]
    return "\n".join(lines)
