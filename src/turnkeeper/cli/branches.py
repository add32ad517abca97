"""`turnkeeper fork SESSION --at SEQ` and `turnkeeper branches SESSION`: conversation branches."""

from __future__ import annotations

from typing import Annotated

import typer

from turnkeeper.cli.app import (
    DbOption,
    JsonOption,
    MetadataOption,
    ProjectOption,
    SessionArg,
    app,
    open_ctx,
    ttl_value,
)


@app.command("fork")
def fork(
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
        typer.Option(
            "--ttl",
            metavar="DURATION|never",
            help="Lifetime without activity, e.g. 24h, or never (default: session_expiration, which is never unless configured).",
        ),
    ] = None,
    project: ProjectOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Fork SESSION: a new session whose history is SESSION's up to --at, to go on differently."""
    with open_ctx(db, json_output) as ctx:
        branch = ctx.tk.fork(
            session, at, key=key, title=title, metadata=metadata, ttl=ttl_value(ttl),
            project=project,
        )  # fmt: skip
        origin = ctx.tk.fork_origin(branch)
        ctx.out.session(
            branch,
            headline=f"[green]Forked[/] session {session} at seq {at}:",
            extra={"forked_from": origin},
        )


@app.command("branches")
def branches(
    session: SessionArg, project: ProjectOption = None, db: DbOption = None,
    json_output: JsonOption = False,
) -> None:  # fmt: skip
    """List the branches forked from SESSION, and where SESSION itself came from."""
    with open_ctx(db, json_output) as ctx:
        found = ctx.tk.get_session(session, project=project)
        ctx.out.branches(
            found.id, ctx.tk.fork_origin(found), ctx.tk.branches(found, project=project)
        )
