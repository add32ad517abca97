"""Erasure and legal holds, as `tk.erase`, `tk.set_legal_hold`, `tk.legal_holds` and
`tk.held_sessions` (the `ErasureStore` capability).

An erasure picks sessions — every session of a subject (across projects unless one is named),
one session and the branches forked from it (they hold copies of its messages), or every
session of a project — and removes each whole, leaving a tombstone: the store deletes its rows
and writes the tombstone in one transaction, the caches in front of it forget their entries,
the encrypting store destroys its data key, and this part drops the windows it remembers. A
legal hold keeps a session from it; the receipt says which were held. See docs/privacy.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from turnkeeper.errors import InvalidInput, SessionErased, SessionNotFound
from turnkeeper.logs import get_logger
from turnkeeper.service.core import Capability, Core, SessionRef
from turnkeeper.storage.base import (
    AgentStateStore,
    ErasureStore,
    ForkStore,
    SummaryStore,
    TraceStore,
    every_session,
)
from turnkeeper.types import ErasedSession, ErasureReceipt, LegalHold, Session, SessionFilter
from turnkeeper.validation import check_name, check_text

FEATURE = "erasure and legal holds"
"""What a store without `ErasureStore` is told it cannot serve."""

log = get_logger("turnkeeper.erasure")


class Erasure:
    """Erasing sessions for good, and the legal holds that stop it."""

    _store = Capability(ErasureStore, FEATURE)

    def __init__(self, core: Core, forget: Callable[[str], None]) -> None:
        """`forget(session_id)` drops what the service itself remembers of a session (its
        last window)."""
        self.core = core
        self._forget = forget

    def erase(
        self,
        *,
        subject: str | None = None,
        session: SessionRef | None = None,
        project: str | None = None,
        dry_run: bool = False,
    ) -> ErasureReceipt:
        """Remove every trace of the chosen sessions and leave a tombstone of each, so that
        their ids never come back (no append, import or fork; `SessionErased`, HTTP 410).

        Choose by `subject` (every session whose `subject` is it, in every project unless
        `project` narrows it), by `session` (an id or key, looked up in `project`; its
        branches go with it, as they hold copies of its messages), or by `project` alone
        (every session of it). Removed: messages (and their search index entries), summary
        checkpoints, turn traces, agent states, turn attempt and idempotency records, the
        cached entries (in-process and Redis) and, when encrypted, the session's data key.
        A session under a legal hold is left whole and listed in the receipt's `held`. With
        `dry_run`, nothing changes and the receipt says what would go.
        """
        if not isinstance(dry_run, bool):
            raise InvalidInput("dry_run", "must be true or false")
        store = self._store
        now = self.core.now()
        asked, ids, already = self._chosen(subject, session, project)
        held = store.held_sessions(ids)
        kept = [session_id for session_id in ids if session_id in held]
        erased: list[ErasedSession] = []
        for session_id in (i for i in ids if i not in held):
            if dry_run:
                erased.append(self._would_erase(session_id))
                continue
            try:
                gone = store.erase_session(session_id, now=now)
            except SessionErased:
                already.append(session_id)  # erased meanwhile, by another caller
                continue
            except SessionNotFound:
                continue  # deleted meanwhile: nothing of it is left to erase
            if gone is None:
                kept.append(session_id)  # a hold came meanwhile
                continue
            self._forget(session_id)
            erased.append(gone)
        receipt = _receipt(now, erased, kept, already, dry_run=dry_run, asked=asked)
        if not dry_run:  # ids and counts only: never the subject
            log.info(
                "sessions_erased",
                sessions=len(receipt.sessions),
                held=len(receipt.held),
                messages=receipt.messages,
            )
        return receipt

    def _chosen(
        self, subject: Any, session: SessionRef | None, project: str | None
    ) -> tuple[dict[str, Any], list[str], list[str]]:
        """What was asked (for the receipt), the ids of the sessions it chooses, and those
        asked for by id that are tombstones already."""
        asked: dict[str, Any] = {"subject": None, "session": None, "project": project}
        if subject is not None:
            if session is not None:
                raise InvalidInput("session", "erase by subject or by session, not both")
            asked["subject"] = _subject(subject)
            where = SessionFilter(project=check_name("project", project), subject=asked["subject"])
            return asked, self._ids(where), []
        if session is not None:
            asked["session"] = session.id if isinstance(session, Session) else session
            try:
                found = self.core.get_session(session, project=project)
            except SessionErased as tombstone:
                return asked, [], [tombstone.session_id]
            return asked, [found.id, *self._branches_of(found.id)], []
        if project is None:
            raise InvalidInput("subject", "say what to erase: a subject, a session or a project")
        name = check_name("project", project)
        if not name:
            raise InvalidInput("project", "name the project to erase")
        return asked, self._ids(SessionFilter(project=name)), []

    def set_legal_hold(
        self,
        session: SessionRef | None = None,
        held: bool = True,
        *,
        project: str | None = None,
    ) -> LegalHold | None:
        """Put a legal hold on a session (`set_legal_hold(session, True)`; `project` is where
        a key is looked up) or, without a session, on every session of `project`, present and
        future (`set_legal_hold(project="p", held=True)`); `held=False` clears it. While held,
        `erase` (and retention) leave the sessions whole. Returns the hold now standing (a
        hold set again keeps its first time), or None once cleared."""
        if not isinstance(held, bool):
            raise InvalidInput("held", "must be true or false")
        store = self._store
        now = self.core.now()
        if session is not None:
            found = self.core.get_session(session, project=project)
            store.set_session_hold(found.id, held, now=now)
            return _hold(store.legal_holds(found.project), found.id)
        name = check_name("project", project)
        if not name:
            raise InvalidInput("session", "name the session (or the project) to hold")
        store.set_project_hold(name, held, now=now)
        return _hold(store.legal_holds(name), None)

    def legal_holds(self, *, project: str | None = None) -> list[LegalHold]:
        """The legal holds standing (of `project`, or all): per project, the project's own
        hold first, then its sessions'."""
        return self._store.legal_holds(check_name("project", project))

    def held_sessions(self, session_ids: Iterable[str]) -> frozenset[str]:
        """Those of `session_ids` a legal hold covers (their own or their project's): what
        retention and erasure must leave alone."""
        if isinstance(session_ids, str):
            raise InvalidInput("session_ids", "must be a list of session ids, not one string")
        ids = list(session_ids)
        if not all(isinstance(session_id, str) for session_id in ids):
            raise InvalidInput("session_ids", "must be session ids (text)")
        return self._store.held_sessions(ids)

    # -- which sessions ---------------------------------------------------------------------

    def _ids(self, where: SessionFilter) -> list[str]:
        """Ids of every session matching `where`, read whole before anything is erased
        (erasing moves the listing's pages)."""
        return [session.id for session in every_session(self.core.store, where)]

    def _branches_of(self, session_id: str) -> list[str]:
        """Every branch forked from the session, and from those, and so on."""
        forks = self.core.store
        if not isinstance(forks, ForkStore):
            return []
        found: list[str] = []
        waiting = [session_id]
        while waiting:
            for branch in forks.list_branches(waiting.pop()):
                if branch.session_id not in found:
                    found.append(branch.session_id)
                    waiting.append(branch.session_id)
        return found

    def _would_erase(self, session_id: str) -> ErasedSession:
        """What erasing the session would remove (a dry run), read through the capabilities."""
        store: Any = self.core.store
        session = store.get_session(session_id)
        traces = (
            len(store.read_traces(session_id, upto_seq=session.last_seq, limit=session.last_seq))
            if isinstance(store, TraceStore) and session.last_seq
            else 0
        )
        return ErasedSession(
            session_id=session_id,
            project=session.project,
            messages=session.message_count,
            summaries=len(store.list_summaries(session_id))
            if isinstance(store, SummaryStore)
            else 0,
            traces=traces,
            agent_states=len(store.list_agent_states(session_id))
            if isinstance(store, AgentStateStore)
            else 0,
        )


def _subject(value: Any) -> str:
    """A subject to erase: the text a session's `subject` holds, never empty."""
    subject = check_text("subject", value, max_length=255)
    if not subject:
        raise InvalidInput("subject", "must be the non-empty subject the sessions were given")
    return subject


def _receipt(
    now: datetime,
    erased: list[ErasedSession],
    held: list[str],
    already: list[str],
    *,
    dry_run: bool,
    asked: dict[str, Any],
) -> ErasureReceipt:
    return ErasureReceipt(
        erased_at=now,
        sessions=tuple(e.session_id for e in erased),
        held=tuple(held),
        already_erased=tuple(already),
        messages=sum(e.messages for e in erased),
        summaries=sum(e.summaries for e in erased),
        traces=sum(e.traces for e in erased),
        agent_states=sum(e.agent_states for e in erased),
        dry_run=dry_run,
        **asked,
    )


def _hold(holds: list[LegalHold], session_id: str | None) -> LegalHold | None:
    return next((hold for hold in holds if hold.session_id == session_id), None)
