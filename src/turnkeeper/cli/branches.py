"""`turnkeeper fork SESSION --at SEQ` and `turnkeeper branches SESSION`: conversation branches."""

from __future__ import annotations

from typing import Annotated

import typer

from turnkeeper.cli.app import (
    Ctx,
    MetadataOption,
    ProjectOption,
    SessionArg,
    app,
    command,
    ttl_option,
    ttl_value,
)


@command(app, "fork")
def fork(
    ctx: Ctx,
    session: SessionArg,
    at: Annotated[
        int,
        typer.Option(
            "--at",
            metavar="SEQ",
            min=0,
            help="The last seq the branch shares with SESSION (0: none of it).",
        ),
    ],
    key: Annotated[
        str | None,
        typer.Option("--key", metavar="K", help="Key of the branch, free among live sessions."),
    ] = None,
    title: Annotated[
        str | None, typer.Option("--title", metavar="T", help="Default: the source's title.")
    ] = None,
    metadata: MetadataOption = None,
    ttl: Annotated[
        str | None,
        ttl_option(
            "Lifetime without activity, e.g. 24h, or never (default: session_expiration, which "
            "is never unless configured)."
        ),
    ] = None,
    project: ProjectOption = None,
) -> None:
    """Fork SESSION: a new session whose history is SESSION's up to --at, to go on differently."""
    branch = ctx.tk.fork(
        session, at, key=key, title=title, metadata=metadata, ttl=ttl_value(ttl), project=project
    )
    origin = ctx.tk.fork_origin(branch)
    ctx.out.session(
        branch,
        headline=f"[green]Forked[/] session {session} at seq {at}:",
        extra={"forked_from": origin},
    )


@command(app, "branches")
def branches(ctx: Ctx, session: SessionArg, project: ProjectOption = None) -> None:
    """List the branches forked from SESSION, and where SESSION itself came from."""
    found = ctx.tk.get_session(session, project=project)
    ctx.out.branches(found.id, ctx.tk.fork_origin(found), ctx.tk.branches(found, project=project))
