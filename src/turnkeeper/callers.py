"""Who is calling and which sessions they may reach, for every face that serves callers
(the HTTP service, the MCP server), kept free of any web framework.

A project caller sees its own project only: a session of another project, addressed by id or
key, is not found (`SessionNotFound`, so its existence is not revealed); naming another project
outright is `Forbidden`. An admin sees every project.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from turnkeeper.errors import (
    Conflict,
    Forbidden,
    SessionNotFound,
    TooManyRequests,
    TurnkeeperError,
)
from turnkeeper.service import Turnkeeper


@dataclass(frozen=True, slots=True)
class Caller:
    """The authenticated caller: a project key (`project` set) or an admin (sees all)."""

    project: str | None
    admin: bool
    key_id: str | None = None

    def may_see(self, project: str) -> bool:
        """Whether this caller may learn what project `project` holds."""
        return self.admin or project == self.project

    def scope(self, requested: str | None) -> str | None:
        """The project a request works in. A project key works in its own (naming another is
        `Forbidden`); an admin works in the one it names, or across all when it names none."""
        if self.admin:
            return requested
        if requested is not None and requested != self.project:
            raise Forbidden(f"this API key belongs to project {self.project!r}")
        return self.project


ANONYMOUS_ADMIN = Caller(project=None, admin=True)
"""The caller when no keys are asked for (`--no-auth`, or a local MCP server on stdio)."""


def located(
    tk: Turnkeeper,
    error: SessionNotFound,
    *,
    may_see: Callable[[str], bool],
    how: Callable[[str], str],
) -> SessionNotFound:
    """`error` saying where the session is: the other projects holding it (by id or key) that
    the caller `may_see`, and `how` to ask there (`how(project)`, e.g. "pass --project acme").
    `error` itself when it names no project or the caller may see none of them, so a caller
    never learns that a session exists in a project it may not see."""
    if error.project is None or error.hint is not None:
        return error
    try:
        holders = tk.projects_holding(error.ref)
    except TurnkeeperError:  # the lookup is a courtesy: its failure must not hide the answer
        return error
    others = [p for p in holders if p != error.project and may_see(p)]
    if not others:
        return error
    if len(others) == 1:
        hint = f"it exists in project {others[0]!r}; {how(others[0])}"
    else:
        names = ", ".join(repr(project) for project in others)
        hint = f"it exists in projects {names}; {how(others[0])} (or another of them)"
    return SessionNotFound(error.ref, error.project, hint=hint)


def resolve_session(tk: Turnkeeper, ref: str, scope: str | None) -> str:
    """What `ref` names for a caller working in `scope`. In a project, `ref` as given (the core
    looks keys up there). Across all projects (an admin naming none), a key is found in
    whichever project holds it, and returned as that session's id; a key held in several
    projects is a `Conflict` naming them; a key held nowhere is returned as given (the default
    project's, e.g. for a turn that creates it)."""
    if scope is not None:
        return ref
    try:
        return tk.store.get_session(ref).id
    except SessionNotFound:
        pass
    holders = tk.list_sessions(key=ref, limit=1000).items
    projects = sorted({session.project for session in holders})
    if len(projects) > 1:
        raise Conflict(f"session key {ref!r} is ambiguous: in projects {', '.join(projects)}")
    if projects:
        return tk.get_session(ref, project=projects[0]).id
    return ref


class PerCallerLimit:
    """At most `limit` requests of one kind (`what`: searches) running at once per API key, in
    this process. A request over the limit is refused at once (`TooManyRequests`, HTTP 429 with
    `Retry-After`), not queued: a queue would hold a server thread per waiting request, and one
    key's burst would still crowd out everyone else's work. Every interface that serves callers
    (REST, the UI, MCP) takes its turns here, so together they count once."""

    def __init__(self, limit: int, what: str, *, retry_after: int = 1) -> None:
        self.limit = limit
        self.what = what
        self.retry_after = retry_after
        self._running: dict[str | None, int] = {}
        self._lock = threading.Lock()

    @contextmanager
    def turn(self, caller: Caller) -> Iterator[None]:
        """Run the block as one of `caller`'s requests, or refuse it if it has `limit` running."""
        key = caller.key_id  # None: the one caller of a service without keys
        with self._lock:
            running = self._running.get(key, 0)
            if running >= self.limit:
                raise TooManyRequests(
                    f"this API key already runs {running} {self.what} at once, the most it may;"
                    f" try again in {self.retry_after} s",
                    retry_after=self.retry_after,
                )
            self._running[key] = running + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._running.pop(key) - 1
                if left:
                    self._running[key] = left
