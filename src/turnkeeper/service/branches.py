"""Branches of a conversation, as `tk.fork`, `tk.branches` and `tk.fork_origin` (the
`ForkStore` capability).

A fork copies the source's prefix (messages, their traces, the summary checkpoints and agent
positions that cover only the prefix) into a new session in one transaction; see
`turnkeeper.storage.base.ForkStore` for why copying was chosen over a parent pointer. From
then on the branch is an ordinary session: appends go to it alone, and its context windows,
stats, export and expiry see its whole history without knowing it is a branch.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from turnkeeper.errors import InvalidInput
from turnkeeper.service.core import Capability, Core, SessionRef
from turnkeeper.service.sessions import new_session
from turnkeeper.storage.base import ForkStore
from turnkeeper.types import UNSET, Branch, JSONObject, Session

FEATURE = "branches"
"""What a store without `ForkStore` is told it cannot serve."""


class Branches:
    """Forking a session at a seq, and the forks of a session."""

    _forks = Capability(ForkStore, FEATURE)

    def __init__(self, core: Core) -> None:
        self.core = core

    def fork(
        self,
        ref: SessionRef,
        at_seq: int,
        *,
        key: str | None = None,
        title: str | None = None,
        metadata: JSONObject | None = None,
        ttl: timedelta | Any | None = UNSET,
        project: str | None = None,
    ) -> Session:
        """A new session whose history is the source's messages up to and including `at_seq`
        (0: none), to continue on another path. Appends go to the branch only.

        The branch takes the source's subject, kind, phase and (unless given) title and
        metadata; `key` must be free among the project's live sessions. The prefix is copied
        (O(prefix) rows, in one transaction) with its summary checkpoints and agent positions,
        so nothing is recomputed and deleting the source leaves the branch whole. Raises
        `InvalidInput` naming `at_seq` outside `0..last_seq`, `SessionExpired` / `Conflict` for
        an expired / archived source, `Conflict` for a key in use.
        """
        if isinstance(at_seq, bool) or not isinstance(at_seq, int):
            raise InvalidInput(
                "at_seq", "must be an integer seq (0 forks before the first message)"
            )
        source = self.core.get_session(ref, project=project)
        new = new_session(
            self.core,
            key=key,
            project=source.project,
            subject=source.subject,
            kind=source.kind,
            title=source.title if title is None else title,
            phase=source.phase,
            metadata=dict(source.metadata) if metadata is None else metadata,
            ttl=ttl,
        )
        return self._forks.fork_session(source.id, at_seq, new, now=self.core.now())

    def branches(self, ref: SessionRef, *, project: str | None = None) -> list[Branch]:
        """The branches forked from this session with their fork points, oldest first."""
        return self._forks.list_branches(self.core.get_session(ref, project=project).id)

    def fork_origin(self, ref: SessionRef, *, project: str | None = None) -> Branch | None:
        """Where this session was forked from (its source and fork point); None if it is not
        a branch. The source may have been deleted since."""
        return self._forks.fork_origin(self.core.get_session(ref, project=project).id)
