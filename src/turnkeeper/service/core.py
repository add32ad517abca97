"""What every part of the service shares (`Core`): the store, the settings, the clock, the
summarizer, and the resolution of a session reference (id or key, in a project) into a session.

Each part (`sessions`, `messages`, `windows`, `digest`, `search`, `branches`, `agents`,
`transfer`) is an object over one `Core` and keeps its own store calls, so a part's store
contract is visible in one file (an optional capability it needs is declared as a
`Capability`); `Turnkeeper` (`facade`) holds the parts.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Generic, Protocol, TypeVar, overload

from turnkeeper.config import Settings
from turnkeeper.context.checkpoints import Checkpointed, SessionLocks
from turnkeeper.context.summarizer import ExtractiveSummarizer, LLMSummarizer, Summarizer
from turnkeeper.errors import InvalidInput, SessionErased, SessionExpired, SessionNotFound
from turnkeeper.storage.base import Store, lookup_session, require
from turnkeeper.storage.codec import to_ts_or_none
from turnkeeper.tokens import TokenCounter, counter_for
from turnkeeper.types import Session, SessionStatus
from turnkeeper.validation import check_name

SessionRef = Session | str
"""A session, its id, or its key (looked up in the project)."""

MAX_PAGE = 1000
"""The largest page `list_sessions` returns."""

T = TypeVar("T")
E = TypeVar("E", bound=enum.Enum)


def utcnow() -> datetime:
    return datetime.now(UTC)


def default_summarizer(settings: Settings) -> Summarizer:
    """The LLM summarizer when `summary_model` is set, else the offline extractive one."""
    if settings.summary_model is None:
        return ExtractiveSummarizer()
    from turnkeeper.llm import LLMClient

    return LLMSummarizer(
        LLMClient.from_settings(settings),
        model=settings.summary_model,
        prompt=settings.summary_prompt,
    )


def agent_name(field: str, value: str) -> str:
    """An agent's name: a required name (the same rules as keys)."""
    name = check_name(field, value)
    if not name:
        raise InvalidInput(field, "an agent name is required")
    return name


def one_of(field: str, value: E | str, kind: type[E]) -> E:
    """`value` as a member of the enum `kind`; else `InvalidInput` naming the members (the
    listings' filters: a role, a status)."""
    try:
        return kind(value)
    except ValueError:
        names = ", ".join(str(member.value) for member in kind)
        raise InvalidInput(field, f"unknown {field} {value!r}; use {names}") from None


def at_most(field: str, value: int, most: int) -> int:
    """`value` unless it is above `most`, the deepest a listing pages (`InvalidInput`)."""
    if value > most:
        raise InvalidInput(field, f"must be at most {most}, got {value}")
    return value


def refuse_expired(session: Session) -> None:
    """Raise `SessionExpired` for an expired session (it is never live again)."""
    if session.status is SessionStatus.EXPIRED:
        raise SessionExpired(session.id, to_ts_or_none(session.expires_at) or "")


class Through(Generic[T]):
    """A read-only attribute of a facade that is the same attribute of one of its parts:
    `store = Through[Store]("_core")` makes `tk.store` read `tk._core.store`. The facades
    (`Turnkeeper`, the async face) show their parts' attributes as their own with one line
    each, where a property apiece would repeat the same three lines."""

    def __init__(self, part: str) -> None:
        self.part = part
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        if self.name and self.name != name:
            raise TypeError(f"{owner.__name__}.{name} must name the {self.name} it reads")
        self.name = name

    @overload
    def __get__(self, facade: None, owner: type) -> Through[T]: ...

    @overload
    def __get__(self, facade: object, owner: type) -> T: ...

    def __get__(self, facade: object | None, owner: type) -> Any:
        if facade is None:
            return self
        return getattr(getattr(facade, self.part), self.name)

    def __set__(self, facade: object, value: object) -> None:
        raise AttributeError(f"{self.name} is read-only: it is the {self.part}'s")


class Part(Protocol):
    """A part of the service: an object over one `Core`."""

    @property
    def core(self) -> Core: ...


class Capability(Generic[T]):
    """The store of a part's core as the optional capability (`storage.base`) the part's
    operations need: `_forks = Capability(ForkStore, "branches")` makes `self._forks` the
    store as a `ForkStore`, or raise `Unsupported` saying that branches need one. Read on
    each use, as `require` is, so a part holds no second reference to the store."""

    def __init__(self, capability: Callable[..., T], feature: str) -> None:
        self.capability = capability
        self.feature = feature
        """What a store without the capability is told it cannot serve."""

    def __get__(self, part: Part, owner: type) -> T:
        return require(part.core.store, self.capability, self.feature)


class AgentPositions(Protocol):
    """What other parts ask of the agents part (`tk.agents`), named here so the core does not
    import the part built on top of it."""

    def position(self, session_id: str, agent: str) -> int: ...

    def execution_ms(self, session_id: str) -> int: ...


class Core:
    """What every part of one service shares: the store, the settings, the clock, the
    summarizer, and session resolution.

    Every part resolves references here, so the project scope (isolation) and the clock's
    view of expiry are the same whichever operation is called.
    """

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        clock: Callable[[], datetime] = utcnow,
        summarizer: Summarizer | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self.summarizer = summarizer or default_summarizer(settings)
        self.locks = SessionLocks()
        """One lock per session for checkpoint writes (`context.checkpoints`)."""
        self.encoding = store.meta("token_encoding", settings.token_encoding)
        """Encoding the stored token counts were made with (fixed when the database was made)."""

    @property
    def counter(self) -> TokenCounter:
        """The tokenizer stored counts are made with."""
        return counter_for(self.encoding)

    def now(self) -> datetime:
        """The current time as this service sees it (its clock decides expiry)."""
        return self.clock()

    def project(self, project: str | None) -> str:
        """A checked project name, or the configured default."""
        return check_name("project", project) or self.settings.default_project

    def present(self, session: Session) -> Session:
        """An active session past its expiry is shown as expired: it is never live again."""
        if session.status is SessionStatus.ACTIVE and session.is_expired_at(self.clock()):
            return dataclasses.replace(session, status=SessionStatus.EXPIRED)
        return session

    def get_session(self, ref: SessionRef, *, project: str | None = None) -> Session:
        """A session by id or key. With `project`, a session of another project is not found
        (isolation). A key is looked up in `project` (default: the configured default)."""
        if isinstance(ref, Session):
            ref = ref.id
        if not isinstance(ref, str) or not ref:
            raise InvalidInput("session", "must be a session id or key")
        try:  # by id, else by key, in one read where the store can (`lookup_session`)
            found = lookup_session(self.store, ref, self.project(project))
        except SessionErased as erased:
            if project is not None and erased.project != project:
                raise SessionNotFound(ref, project) from None  # another project's: not ours
            raise
        except SessionNotFound:
            check_name("session", ref)  # a reference no key could be is a bad input
            raise
        if project is not None and found.project != project:
            raise SessionNotFound(ref, project)
        return self.present(found)

    def checkpointed(self, session_id: str) -> Checkpointed:
        """The session's rolling summaries (stored checkpoints), shared by context and digest."""
        return Checkpointed(
            self.summarizer, self.store, session_id, clock=self.clock, locks=self.locks
        )
