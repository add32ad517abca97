"""`turnkeeper search QUERY`: full-text search over message content (llm's `logs -q` habit)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any

import typer
from rich.text import Text

from turnkeeper import records
from turnkeeper.cli.app import Ctx, IncludeInternalOption, app, command, parse_since
from turnkeeper.cli.output import Output, listing
from turnkeeper.storage.search import SearchHit


def _only(name: str, metavar: str, what: str) -> Any:
    """A filter of the search: only the hits `what` names."""
    return typer.Option(name, metavar=metavar, help=f"Only {what}.")


def _time_option(name: str, meaning: str) -> Any:
    return typer.Option(
        name,
        parser=parse_since,
        metavar="TIME",
        help=f"Messages created {meaning} (ISO 8601; UTC if no zone is given).",
        show_default=False,
    )


@command(app, "search")
def search(
    ctx: Ctx,
    query: Annotated[
        str,
        typer.Argument(
            metavar="QUERY",
            help='Words (all must appear), "a phrase", a OR b, -excluded, prefix*.',
        ),
    ],
    session: Annotated[
        str | None, _only("--session", "SESSION", "this session (id or key)")
    ] = None,
    role: Annotated[str | None, _only("--role", "ROLE", "messages of this role")] = None,
    author: Annotated[str | None, _only("--author", "A", "messages by this author")] = None,
    kind: Annotated[str | None, _only("--kind", "K", "sessions of this kind")] = None,
    since: Annotated[datetime | None, _time_option("--since", "at or after")] = None,
    until: Annotated[datetime | None, _time_option("--until", "before")] = None,
    internal: IncludeInternalOption = True,
    limit: Annotated[int, typer.Option("--limit", "-n", metavar="N", help="At most N hits.")] = 20,
    offset: Annotated[int, typer.Option("--offset", metavar="N", help="Skip the first N.")] = 0,
    project: Annotated[
        str | None,
        typer.Option(
            "--project", metavar="P", help="Search this project only (default: every project)."
        ),
    ] = None,
) -> None:
    """Find messages by their content, best matches first, with the matching words marked."""
    hits = ctx.tk.search(
        query, project=project, session=session, role=role, author=author, kind=kind,
        since=since, until=until, include_internal=internal, limit=limit, offset=offset,
    )  # fmt: skip
    print_hits(ctx.out, hits)


def print_hits(out: Output, hits: Sequence[SearchHit]) -> None:
    """A table of hits (session, seq, time, role, snippet with matches in bold), or JSON."""
    document = {"hits": [{**_plain(hit), "snippet_text": hit.marked("", "")} for hit in hits]}
    if out.listed(document, hits, "No messages found."):
        return
    table = listing("session")
    table.add_column("seq", justify="right")
    table.add_column("time", no_wrap=True)
    table.add_column("role")
    table.add_column("snippet", overflow="fold", ratio=1)
    for hit in hits:
        snippet = Text()
        for part in hit.snippet:
            snippet.append(" ".join(part.text.splitlines()), "bold yellow" if part.match else "")
        table.add_row(
            Text(hit.session_key or hit.session_id),
            str(hit.seq),
            hit.created_at.astimezone().strftime("%Y-%m-%d %H:%M"),
            Text(hit.role.value),
            snippet,
        )
    out.console.print(table)


def _plain(hit: SearchHit) -> dict[str, object]:
    value = records.plain(hit)
    assert isinstance(value, dict)
    return value
