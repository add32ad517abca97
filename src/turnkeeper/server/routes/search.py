"""`/v1/search`: full-text search over message content, in the caller's project."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from turnkeeper.callers import resolve_session
from turnkeeper.server.deps import TK, CallerDep, Scope, Searches
from turnkeeper.server.problems import PROBLEM_RESPONSES
from turnkeeper.server.schemas import SearchResults
from turnkeeper.service.search import MAX_SEARCH_OFFSET, MAX_SEARCH_PAGE
from turnkeeper.storage.search import MAX_QUERY_LENGTH
from turnkeeper.types import Role

router = APIRouter(prefix="/v1/search", tags=["search"], responses=PROBLEM_RESPONSES)


@router.get("")
def search_messages(
    tk: TK,
    caller: CallerDep,
    scope: Scope,
    searches: Searches,
    q: Annotated[
        str,
        Query(
            max_length=MAX_QUERY_LENGTH,
            description='Words (all must appear), "a phrase", a OR b, -excluded, prefix*.',
            examples=["lisbon -porto"],
        ),
    ],
    session: Annotated[
        str | None, Query(min_length=1, max_length=255, description="Session id or key.")
    ] = None,
    role: Role | None = None,
    author: Annotated[str | None, Query(max_length=255)] = None,
    kind: Annotated[str | None, Query(max_length=255, description="Session kind.")] = None,
    since: Annotated[
        datetime | None, Query(description="Messages created at or after (with time zone).")
    ] = None,
    until: Annotated[
        datetime | None, Query(description="Messages created before (with time zone).")
    ] = None,
    include_internal: bool = True,
    limit: Annotated[int, Query(ge=1, le=MAX_SEARCH_PAGE)] = 20,
    offset: Annotated[int, Query(ge=0, le=MAX_SEARCH_OFFSET)] = 0,
) -> SearchResults:
    """Messages whose content matches `q`, best first, with highlighted snippets. A project
    key searches its own project only; an admin key all projects, or `project`. One key runs
    `search_concurrency` searches at once at most (429 beyond); a search that runs past
    `search_timeout` is a 422 asking for a narrower query."""
    with searches.turn(caller):
        hits = tk.search(
            q, project=scope, role=role, author=author, kind=kind, since=since, until=until,
            session=resolve_session(tk, session, scope) if session else None,
            include_internal=include_internal, limit=limit, offset=offset,
        )  # fmt: skip
    return SearchResults.from_domain(q, hits, limit=limit, offset=offset)
