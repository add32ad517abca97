"""`turnkeeper gc`, `stats` and `demo`: housekeeping, numbers, and a guided tour."""

from __future__ import annotations

import shlex
from datetime import timedelta
from pathlib import Path
from typing import Annotated

import typer

from turnkeeper.cli.app import (
    Ctx,
    DbOption,
    JsonOption,
    ProjectOption,
    app,
    command,
    open_ctx,
    parse_timedelta,
)
from turnkeeper.config import demo_database_url
from turnkeeper.context.formats import to_openai
from turnkeeper.types import NewMessage, StrategyName
from turnkeeper.wording import counted


@command(app, "gc")
def gc(
    ctx: Ctx,
    delete: Annotated[
        bool, typer.Option("--delete", help="Also delete expired sessions past the grace period.")
    ] = False,
    grace: Annotated[
        timedelta | None,
        typer.Option(
            "--grace",
            metavar="DURATION",
            parser=parse_timedelta,
            help="Keep expired sessions this long before deleting them, e.g. 7d (default: "
            "expiry_grace).",
            show_default=False,
        ),
    ] = None,
    archive_dir: Annotated[
        Path | None,
        typer.Option(
            "--archive-dir",
            metavar="DIR",
            help="First write the sessions to delete to a JSONL file in DIR (readable by "
            "`turnkeeper import`); default: archive_dir.",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Report what would be expired and deleted (past retention too) and what a "
            "legal hold keeps; change nothing.",
        ),
    ] = False,
) -> None:
    """Mark sessions past their expiry as expired (and with --delete, delete old ones).

    With a retention set (`retention`, `project_retention`), also delete every session whose
    last change is older than its project's retention, and the older messages of the
    sessions that live on; a legal hold keeps a session from all of it. Prints counts;
    --json lists the session ids.
    """
    retains = ctx.tk.settings.retains
    if dry_run:
        ctx.out.expiry(
            ctx.tk.transfer.expire(delete=delete, grace=grace, dry_run=True),
            delete=delete,
            dry_run=True,
            retains=retains,
        )
        return
    # The plan gives the progress bar its total (what is deleted may differ by a few
    # sessions that expire or are deleted meanwhile; the report says what happened).
    planned = (
        ctx.tk.transfer.expire(delete=delete, grace=grace, dry_run=True)
        if delete or retains
        else None
    )
    total = 0 if planned is None else len(planned.deleted) + len(planned.retention_deleted)
    with ctx.out.progress("Deleting sessions", total=total) as advance:
        report = ctx.tk.transfer.expire(
            delete=delete, grace=grace, archive_dir=archive_dir, progress=lambda _: advance()
        )
    ctx.out.expiry(report, delete=delete, retains=retains)


@command(app, "stats")
def stats(
    ctx: Ctx,
    session: Annotated[
        str | None,
        typer.Argument(metavar="SESSION", help="A session id or key (default: per project)."),
    ] = None,
    project: ProjectOption = None,
) -> None:
    """Statistics of one session, or of every project (or of --project)."""
    if session is not None:
        ctx.out.session_stats(ctx.tk.session_stats(session, project=project))
    else:
        ctx.out.project_stats(ctx.tk.project_stats(project))


DEMO_KEY = "demo-trip-planner"
DEMO_TURNS = (
    ("system", "You are a friendly travel planner. Keep answers short and practical."),
    ("user", "I have four days in Lisbon next May. What should I not miss?"),
    (
        "assistant",
        "Belém for the tower and custard tarts, Alfama's viewpoints at sunset, a day trip to "
        "Sintra, and LX Factory on a Sunday. Book Pena Palace tickets ahead.",
    ),
    ("user", "We're vegetarian. Where should we eat?"),
    (
        "assistant",
        "Try Ao 26 Vegan Food Project near Chiado, the Time Out Market for variety, and ask "
        "for 'sem carne' at any tasca: most can make a vegetable prato do dia.",
    ),
    ("user", "Is tram 28 worth the queue?"),
    (
        "assistant",
        "Ride it early, before 9am, from Martim Moniz. Later in the day, walk the same route "
        "through Graça and Alfama instead: it's quicker and you see more.",
    ),
)


@app.command("demo")
def demo(db: DbOption = None, json_output: JsonOption = False) -> None:
    """A short guided tour: a session, a few turns, and the windows strategies build from them.

    It keeps its own database (demo.db beside the default one) unless given --db, and is safe
    to run again: the demo's messages have fixed ids, so a second run adds nothing.
    """
    db = db or demo_database_url()
    with open_ctx(db, json_output) as ctx:
        tk, out = ctx.tk, ctx.out
        where = f" --db {shlex.quote(db)}"
        out.note(f"The demo keeps its own database: [bold]{ctx.tk.store.url}[/] (--db to choose).")
        out.command(
            f"turnkeeper sessions create --key {DEMO_KEY} --title 'Lisbon trip'"
            f" --get-or-create{where}"
        )
        session, created = tk.get_or_create_session(DEMO_KEY, title="Lisbon trip")
        out.note(f"{'Created' if created else 'Reusing'} session {session.id}.")
        role, text = DEMO_TURNS[0]
        out.command(f"turnkeeper add {DEMO_KEY} --role {role} {shlex.quote(text)}{where}")
        # Fixed ids, so a re-run appends nothing (appending a stored id is a no-op). They embed
        # the session id because message ids are unique database-wide: a new demo session
        # (after the old one is archived) must not collide with the old one's messages.
        turns = [
            NewMessage(role=role, content=text, id=f"{session.id}.demo-{n}")
            for n, (role, text) in enumerate(DEMO_TURNS, start=1)
        ]
        added = sum(m.seq > session.last_seq for m in tk.append_many(session, turns))
        out.note(
            f"… and {counted(len(turns) - 1, 'more turn')}: {counted(added, 'message')} added"
            + ("." if added else " (their ids are fixed, so a second run adds none).")
        )
        if out.json:
            out.document(
                {"session": tk.get_session(session), "messages_added": added, "database": db}
            )
            return
        _tour(ctx, where)


def _tour(ctx: Ctx, where: str) -> None:
    tk, out = ctx.tk, ctx.out
    out.command(f"turnkeeper history {DEMO_KEY}{where}")
    session = tk.get_session(DEMO_KEY)  # the totals after the appends
    out.history(session.id, tk.history(session))
    for strategy, budget, keep_recent in (
        (StrategyName.SLIDING_WINDOW, 120, None),
        (StrategyName.SUMMARIZE, 150, 2),
    ):
        recent = "" if keep_recent is None else f" --keep-recent {keep_recent}"
        out.command(
            f"turnkeeper context {DEMO_KEY} --strategy {strategy} --budget {budget}{recent}{where}"
        )
        window = tk.context(
            session, strategy=strategy, budget_tokens=budget, keep_recent=keep_recent,
            preview=True,
        )  # fmt: skip
        out.context(window, to_openai(window))
    out.command(f"turnkeeper stats {DEMO_KEY}{where}")
    out.session_stats(tk.session_stats(session))
    out.note("\n[dim]Every command takes --json for scripts, and --help for the rest.[/]")
