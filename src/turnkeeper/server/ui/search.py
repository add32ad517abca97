"""The UI's message search: `/search?q=…`, reached from the search box on every page.

Like every view, it parses the request, calls the core once and renders a template. A query the
core refuses (an unclosed quote, a stray OR) is shown on the page beside the box, with what was
typed kept, rather than as an error page: it is a typo to fix, not a failure.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request, Response

from turnkeeper.errors import InvalidInput
from turnkeeper.server.deps import TK, Searches
from turnkeeper.server.ui.render import page
from turnkeeper.server.ui.views import UICaller, UIRoute
from turnkeeper.storage.search import SYNTAX_HINT, SearchHit
from turnkeeper.types import Role

router = APIRouter(include_in_schema=False, route_class=UIRoute)
PAGE_SIZE = 25


def _day(field: str, value: str) -> datetime | None:
    """A date from an `<input type="date">` (midnight UTC), or None when empty."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    except ValueError:
        raise InvalidInput(field, f"must be a date such as 2026-01-31, got {value!r}") from None


@router.get("/search")
def search_page(
    request: Request,
    tk: TK,
    caller: UICaller,
    searches: Searches,
    q: str = "",
    project: str = "",
    role: str = "",
    kind: str = "",
    since: str = "",
    until: str = "",
    page_number: int = 1,
) -> Response:
    """Messages whose content matches `q`, best first, with the matched words highlighted."""
    filters = {"q": q, "project": project, "role": role, "kind": kind, "since": since,
               "until": until}  # fmt: skip
    hits: list[SearchHit] = []
    error = None
    if q.strip():
        try:
            with searches.turn(caller):
                hits = tk.search(
                    q, project=caller.scope(project or None), role=role or None,
                    kind=kind or None, since=_day("since", since), until=_day("until", until),
                    limit=PAGE_SIZE + 1, offset=(max(page_number, 1) - 1) * PAGE_SIZE,
                )  # fmt: skip
        except InvalidInput as exc:
            error = f"{exc.problem}" if exc.field == "q" else str(exc)
    projects = [stats.project for stats in tk.project_stats()] if caller.admin else []
    return page(
        "search.html", request=request, caller=caller, filters=filters, hits=hits[:PAGE_SIZE],
        more=len(hits) > PAGE_SIZE, page_number=max(page_number, 1), error=error,
        projects=projects, roles=list(Role), hint=SYNTAX_HINT,
    )  # fmt: skip
