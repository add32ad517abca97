"""`turnkeeper sessions …`: create, list, show, update, reset, archive and delete sessions."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Annotated, Any

import typer

from turnkeeper.cli.app import (
    Ctx,
    DbOption,
    JsonOption,
    MetadataOption,
    ProjectOption,
    SessionArg,
    UsageProblem,
    app,
    command,
    global_options,
    open_ctx,
    parse_since,
    ttl_option,
    ttl_value,
)
from turnkeeper.types import UNSET, SessionStatus
from turnkeeper.wording import counted

sessions = typer.Typer(
    help="Create, list, inspect and manage sessions (conversations).", no_args_is_help=True
)
app.add_typer(sessions, name="sessions")

TitleOption = Annotated[str | None, typer.Option("--title", metavar="T", help="Title.")]
PhaseOption = Annotated[
    str | None, typer.Option("--phase", metavar="P", help="Phase (e.g. planning, review).")
]


@sessions.command("create")
def create(
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            metavar="K",
            help="Client key, unique among live sessions: letters, digits and . _ : @ + = ~ - "
            "(no /).",
        ),
    ] = None,
    project: ProjectOption = None,
    subject: Annotated[
        str | None, typer.Option("--subject", metavar="S", help="What the talk is about.")
    ] = None,
    kind: Annotated[str | None, typer.Option("--kind", metavar="K", help="Session kind.")] = None,
    title: TitleOption = None,
    phase: PhaseOption = None,
    metadata: MetadataOption = None,
    ttl: Annotated[
        str | None,
        ttl_option(
            "Lifetime without activity, e.g. 24h, 90m, 2d, or never (default: "
            "session_expiration, which is never unless configured)."
        ),
    ] = None,
    get_or_create: Annotated[
        bool,
        typer.Option(
            "--get-or-create", help="Return the live session holding --key if there is one."
        ),
    ] = False,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Create a session (with --get-or-create, reuse the live one holding --key)."""
    lifetime = ttl_value(ttl)
    if get_or_create and key is None:
        raise UsageProblem("--get-or-create needs --key")
    fields: dict[str, Any] = dict(
        project=project, subject=subject, kind=kind, title=title, phase=phase,
        metadata=metadata, ttl=lifetime,
    )  # fmt: skip
    with open_ctx(db, json_output) as ctx:
        if get_or_create and key is not None:
            session, created = ctx.tk.get_or_create_session(key, **fields)
        else:
            session, created = ctx.tk.create_session(key=key, **fields), True
        headline = "[green]Created[/] session:" if created else "Found the live session:"
        ctx.out.session(session, headline=headline, extra={"created": created})


@command(sessions, "list")
def list_sessions(
    ctx: Ctx,
    project: ProjectOption = None,
    subject: Annotated[str | None, typer.Option("--subject", metavar="S")] = None,
    kind: Annotated[str | None, typer.Option("--kind", metavar="K")] = None,
    status: Annotated[SessionStatus | None, typer.Option("--status")] = None,
    key: Annotated[str | None, typer.Option("--key", metavar="K")] = None,
    updated_since: Annotated[
        datetime | None,
        typer.Option(
            "--updated-since",
            metavar="ISO",
            parser=parse_since,
            help="Only sessions updated at or after this time (UTC unless it says otherwise).",
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="Page size (at most 1000).")] = 50,
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="Continue from a previous page.")
    ] = None,
) -> None:
    """List sessions, most recently updated first, a page at a time."""
    page = ctx.tk.list_sessions(
        project=project, subject=subject, kind=kind, status=status, key=key,
        updated_since=updated_since, limit=limit, cursor=cursor,
    )  # fmt: skip
    ctx.out.session_page(page)


@command(sessions, "show")
def show(ctx: Ctx, session: SessionArg, project: ProjectOption = None) -> None:
    """Show a session's fields and statistics."""
    found = ctx.tk.get_session(session, project=project)
    ctx.out.session(found, stats=ctx.tk.session_stats(found, project=project))


@sessions.command("update")
def update(
    session: SessionArg,
    title: TitleOption = None,
    phase: PhaseOption = None,
    metadata: MetadataOption = None,
    ttl: Annotated[
        str | None, ttl_option("New lifetime counted from now, e.g. 24h, or never.")
    ] = None,
    project: ProjectOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Change a session's title, phase, metadata and/or lifetime."""
    if title is None and phase is None and metadata is None and ttl is None:
        raise UsageProblem("nothing to update: give --title, --phase, --metadata and/or --ttl")
    with open_ctx(db, json_output) as ctx:
        updated = ctx.tk.update_session(
            session,
            title=UNSET if title is None else title,
            phase=UNSET if phase is None else phase,
            metadata=UNSET if metadata is None else metadata,
            ttl=ttl_value(ttl),
            project=project,
        )
        ctx.out.session(updated, headline="[green]Updated[/] session:")


@command(sessions, "reset")
def reset(
    ctx: Ctx,
    session: SessionArg,
    keep_system_message: Annotated[
        bool,
        typer.Option("--keep-system-message", help="Keep the first system message."),
    ] = False,
    project: ProjectOption = None,
) -> None:
    """Clear a session's messages, keeping the session itself."""
    cleared = ctx.tk.reset_session(
        session, keep_system_message=keep_system_message, project=project
    )
    ctx.out.session(cleared, headline="[green]Reset[/] session:")


@command(sessions, "archive")
def archive(ctx: Ctx, session: SessionArg, project: ProjectOption = None) -> None:
    """Archive a session: still readable, no longer live (its key becomes free)."""
    archived = ctx.tk.archive_session(session, project=project)
    ctx.out.session(archived, headline="[green]Archived[/] session:")


@sessions.command("delete")
def delete(
    session: SessionArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    project: ProjectOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Delete a session and all its messages (asks first unless --yes or --json)."""
    confirm = not (yes or json_output or global_options().json_output)
    if confirm and not sys.stdin.isatty():
        raise UsageProblem("refusing to delete without confirmation: pass --yes")
    with open_ctx(db, json_output) as ctx:
        found = ctx.tk.get_session(session, project=project)
        if confirm:
            typer.confirm(
                f"Delete session {found.id} ({found.key or 'no key'}, "
                f"{counted(found.message_count, 'message')})?",
                abort=True,
            )
        ctx.tk.delete_session(found.id)
        ctx.out.deleted(found)
