"""Full-text search over message content, as `tk.search` (the `SearchStore` capability).

Validation and scoping live here, the query language and the index in `storage/search.py`, so
every interface (library, HTTP, CLI, UI) answers the same query the same way.
"""

from __future__ import annotations

from datetime import datetime

from turnkeeper.errors import InvalidInput
from turnkeeper.service.core import Core, SessionRef
from turnkeeper.storage.base import require
from turnkeeper.storage.search import SearchFilter, SearchHit, SearchStore, parse_query
from turnkeeper.types import Role
from turnkeeper.validation import check_name, check_non_negative, check_positive, check_text

MAX_SEARCH_PAGE = 100
MAX_SEARCH_OFFSET = 10_000
"""Search pages by offset (ranked results have no stable cursor); deep pages cost a ranking of
everything before them, so they are bounded."""


class Search:
    """Full-text search (`tk.search`)."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def search(
        self,
        query: str,
        *,
        project: str | None = None,
        session: SessionRef | None = None,
        role: Role | str | None = None,
        author: str | None = None,
        kind: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        include_internal: bool = True,
        limit: int = 20,
        offset: int = 0,
    ) -> list[SearchHit]:
        """Messages whose content matches `query`, best first, with highlighted snippets; see
        `turnkeeper.storage.search` for the query language (words, "phrases", OR, -excluded,
        prefix*). Searches `project` (None: every project, as `list_sessions` lists them all);
        the filters narrow to one session (id, or key in `project` or the default project),
        role, author, session kind, and `since <= created_at < until`."""
        parsed = parse_query(query)
        check_positive("limit", limit)
        if limit > MAX_SEARCH_PAGE:
            raise InvalidInput("limit", f"must be at most {MAX_SEARCH_PAGE}, got {limit}")
        check_non_negative("offset", offset)
        if offset > MAX_SEARCH_OFFSET:
            raise InvalidInput("offset", f"must be at most {MAX_SEARCH_OFFSET}, got {offset}")
        for name, moment in (("since", since), ("until", until)):
            if moment is not None and (not isinstance(moment, datetime) or moment.tzinfo is None):
                raise InvalidInput(name, "must be a date and time with a time zone")
        if since is not None and until is not None and until <= since:
            raise InvalidInput("until", "must be later than since")
        if role is not None:
            try:
                role = Role(role)
            except ValueError:
                names = ", ".join(r.value for r in Role)
                raise InvalidInput("role", f"unknown role {role!r}; use {names}") from None
        scope = check_name("project", project)
        where = SearchFilter(
            project=scope,
            session_id=self.core.get_session(session, project=scope).id if session else None,
            role=role,
            author=check_text("author", author, max_length=255),
            kind=check_text("kind", kind, max_length=255),
            since=since,
            until=until,
            include_internal=include_internal,
        )
        store = require(self.core.store, SearchStore, "full-text search")
        return list(store.search_messages(parsed, where, limit=limit, offset=offset))
