"""`turnkeeper erase` and `hold`: erasing sessions for good, and the legal holds that stop it
(see `turnkeeper.service.erasure`, docs/privacy.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from turnkeeper.cli.app import Ctx, ProjectOption, UsageProblem, app, command


@command(app, "erase")
def erase(
    ctx: Ctx,
    subject: Annotated[
        str | None,
        typer.Option(
            "--subject",
            metavar="S",
            help="Erase every session with this subject (in every project unless --project).",
            show_default=False,
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            metavar="ID",
            help="Erase this session (an id, or a key in --project) and its branches.",
            show_default=False,
        ),
    ] = None,
    project: ProjectOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be erased; change nothing.")
    ] = False,
) -> None:
    """Erase sessions for good: by --subject, --session, or every session of --project.

    Messages, summaries, traces, search index entries, agent states, turn records, cached
    entries and (encrypted) data keys go; a tombstone keeps each id from coming back.
    Sessions under a legal hold (`turnkeeper hold`) are left and listed. Prints the receipt.
    """
    receipt = ctx.tk.erase(subject=subject, session=session, project=project, dry_run=dry_run)
    ctx.out.erased(receipt)


@command(app, "hold")
def hold(
    ctx: Ctx,
    session: Annotated[
        str | None,
        typer.Argument(
            metavar="SESSION",
            help="The session to hold (an id, or a key in --project); without it, --project "
            "is held.",
            show_default=False,
        ),
    ] = None,
    project: ProjectOption = None,
    release: Annotated[
        bool, typer.Option("--release", help="Clear the hold instead of setting it.")
    ] = False,
    list_holds: Annotated[
        bool,
        typer.Option("--list", help="List the holds standing (of --project, or all)."),
    ] = False,
) -> None:
    """Put a legal hold on a session or a project (--release clears it): erasure and
    retention leave held sessions whole. --list shows the holds standing."""
    if list_holds:
        if session is not None or release:
            raise UsageProblem("--list takes no SESSION and no --release")
        ctx.out.legal_holds(ctx.tk.legal_holds(project=project))
        return
    standing = ctx.tk.set_legal_hold(session, not release, project=project)
    ctx.out.legal_hold(standing, session=session, project=project)
