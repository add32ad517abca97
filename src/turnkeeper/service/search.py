"""Full-text search over message content, as `tk.search` (the `SearchStore` capability).

Validation and scoping live here, the query language and the index in `storage/search.py`, so
every interface (library, HTTP, CLI, UI) answers the same query the same way.
"""

from __future__ import annotations

from datetime import datetime

from turnkeeper.errors import InvalidInput
from turnkeeper.service.core import Core, SessionRef, at_most, one_of
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
        at_most("limit", check_positive("limit", limit), MAX_SEARCH_PAGE)
        at_most("offset", check_non_negative("offset", offset), MAX_SEARCH_OFFSET)
        for name, moment in (("since", since), ("until", until)):
            if moment is not None and (not isinstance(moment, datetime) or moment.tzinfo is None):
                raise InvalidInput(name, "must be a date and time with a time zone")
        if since is not None and until is not None and until <= since:
            raise InvalidInput("until", "must be later than since")
        role = None if role is None else one_of("role", role, Role)
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
