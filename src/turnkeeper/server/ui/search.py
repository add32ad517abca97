"""The UI's message search: `/search?q=…`, reached from the search box on every page.

Like every view, it parses the request, calls the core once and renders a template. A query the
core refuses (an unclosed quote, a stray OR) is shown on the page beside the box, with what was
typed kept, rather than as an error page: it is a typo to fix, not a failure.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from turnkeeper.errors import InvalidInput
from turnkeeper.server.deps import TK, Searches
from turnkeeper.server.ui.render import page
from turnkeeper.server.ui.views import Filters, UICaller, UIRoute, projects_for
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


@dataclass(frozen=True, slots=True)
class SearchFilters(Filters):
    """The search page's form: the words are looked for in message content; the dates are as
    `<input type="date">` sends them."""

    role: str = ""
    since: str = ""
    until: str = ""


@router.get("/search")
def search_page(
    request: Request,
    tk: TK,
    caller: UICaller,
    searches: Searches,
    filters: Annotated[SearchFilters, Depends()],
    page_number: int = 1,
) -> Response:
    """Messages whose content matches `q`, best first, with the matched words highlighted."""
    hits: list[SearchHit] = []
    error = None
    if filters.q.strip():
        try:
            with searches.turn(caller):
                hits = tk.search(
                    filters.q, project=caller.scope(filters.project or None),
                    role=filters.role or None, kind=filters.kind or None,
                    since=_day("since", filters.since), until=_day("until", filters.until),
                    limit=PAGE_SIZE + 1, offset=(max(page_number, 1) - 1) * PAGE_SIZE,
                )  # fmt: skip
        except InvalidInput as exc:
            error = f"{exc.problem}" if exc.field == "q" else str(exc)
    return page(
        "search.html", request=request, caller=caller, filters=dataclasses.asdict(filters),
        hits=hits[:PAGE_SIZE], more=len(hits) > PAGE_SIZE, page_number=max(page_number, 1),
        error=error, projects=projects_for(tk, caller), roles=list(Role), hint=SYNTAX_HINT,
    )  # fmt: skip
