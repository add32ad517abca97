"""`turnkeeper serve` (the HTTP service) and `turnkeeper keys …` (its API keys)."""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from turnkeeper import telemetry
from turnkeeper.cli.app import (
    Ctx,
    DbOption,
    ProjectOption,
    app,
    command,
    global_options,
)
from turnkeeper.config import load_settings
from turnkeeper.logs import LogFormat, LogLevel
from turnkeeper.types import ApiKey

keys = typer.Typer(help="Make, list and revoke API keys of the HTTP service.", no_args_is_help=True)
app.add_typer(keys, name="keys")


@app.command("serve")
def serve(
    host: Annotated[
        str | None,
        typer.Option("--host", metavar="ADDR", help="Address to bind (default: 127.0.0.1).",
                     show_default=False),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option("--port", metavar="N", help="Port (default: 8000).", show_default=False),
    ] = None,
    no_auth: Annotated[
        bool,
        typer.Option("--no-auth", help="Serve without API keys (loopback addresses only)."),
    ] = False,
    log_level: Annotated[
        LogLevel, typer.Option("--log-level", help="Least severe log lines shown.")
    ] = "info",
    log_format: Annotated[
        LogFormat,
        typer.Option("--log-format",
                     help="Log lines as JSON, or readable console lines; auto: console on a "
                     "terminal, JSON otherwise."),
    ] = "auto",
    workers: Annotated[
        int,
        typer.Option("--workers", metavar="N", min=1, max=64,
                     help="Server processes sharing the port: up to one per core pays "
                     "(/metrics then counts per process)."),
    ] = 1,
    db: DbOption = None,
) -> None:  # fmt: skip
    """Run the HTTP service: the web UI at /, REST under /v1, the chat turn, the
    OpenAI-compatible proxy."""
    from turnkeeper.server import run  # first: without the server extra, this names it
    from turnkeeper.server.observability import configure_logging

    db = db or global_options().db
    settings = load_settings(database_url=db, host=host, port=port, auth=False if no_auth else None)
    sock = run.bind(settings)
    configure_logging(logging.getLevelNamesMapping()[log_level.upper()], log_format)
    url = run.url_of(sock)
    processes = f" ({workers} workers)" if workers > 1 else ""
    typer.echo(
        f"turnkeeper is serving on {url}{processes}\n"
        f"  web UI: {url}/   API docs: {url}/docs   stop: Ctrl-C\n"
        f"  models: {'; '.join(settings.upstreams())}",
        err=True,
    )
    # `main` configured tracing already; again now that logging shows a missing extra
    telemetry.configure()
    run.serve(settings, sock, workers=workers)


def _key_record(key: ApiKey) -> dict[str, object]:
    return {
        "id": key.id, "project": key.project, "name": key.name, "admin": key.admin,
        "created_at": key.created_at.isoformat(),
        "revoked_at": None if key.revoked_at is None else key.revoked_at.isoformat(),
    }  # fmt: skip


@command(keys, "create")
def create_key(
    ctx: Ctx,
    project: Annotated[str, typer.Option("--project", metavar="P", help="The key's project.")],
    admin: Annotated[
        bool, typer.Option("--admin", help="An admin key sees every project.")
    ] = False,
    name: Annotated[str | None, typer.Option("--name", metavar="N", help="A label.")] = None,
) -> None:
    """Make an API key and print it, once: only its hash is stored."""
    key, token = ctx.tk.keys.create(project, name=name, admin=admin)
    if ctx.out.json:
        ctx.out.document({**_key_record(key), "token": token})
        return
    typer.echo(token)
    kind = "admin key" if admin else f"key for project {project!r}"
    ctx.out.warn(f"New {kind} {key.id}. Store it now: it cannot be shown again.")


@command(keys, "list")
def list_keys(ctx: Ctx, project: ProjectOption = None) -> None:
    """List API keys (of --project), revoked ones included; secrets are never shown."""
    records = [_key_record(key) for key in ctx.tk.keys.list_keys(project)]
    if ctx.out.json:
        ctx.out.document(records)
        return
    for record in records:
        state = "revoked" if record["revoked_at"] else "active"
        role = "admin" if record["admin"] else "project"
        typer.echo(f"{record['id']}  {record['project']}  {role}  {state}  {record['name']}")


@command(keys, "revoke")
def revoke_key(
    ctx: Ctx,
    key_id: Annotated[
        str, typer.Argument(metavar="KEY_ID", help="The id (`tk_<id>_…`) to revoke.")
    ],
) -> None:
    """Revoke an API key: every later request with it is refused (401)."""
    key = ctx.tk.keys.revoke(key_id)
    if ctx.out.json:
        ctx.out.document(_key_record(key))
        return
    ctx.out.note(f"Revoked key {key.id} of project {key.project!r}.")
