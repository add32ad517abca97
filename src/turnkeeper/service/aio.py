"""`AsyncTurnkeeper`: the `Turnkeeper` facade for asyncio, over the same core.

Every operation exists once, in the synchronous capability modules beside this one. The async
face holds a `Turnkeeper` and awaits its operations on worker threads of its own, so the
strategies, the validation, the expiry rules and the SQL are the very ones `turnkeeper.open()`
runs: an async caller gets the same names, signatures, results and errors, by construction.
There is no second I/O path: the store, the cache and the model client are the blocking ones,
and the event loop stays free while a worker waits on them.

Each operation is declared here by one line naming the sync method (`Offload`); its signature,
docstring and types come from that method (mypy sees `Callable[P, Awaitable[R]]` with the sync
method's parameters). Pure computations that touch no store (`now`, `budget_for`, `draft`) stay
plain calls, as on `Turnkeeper`. Each face names the class it mirrors (`mirrors=`), and the
class statement fails (`TypeError`) if an operation of that class has no line here, so a new
sync operation cannot ship without its awaited twin.

How many workers (`Workers.for_settings`): PostgreSQL gets one per pooled connection
(`postgres_pool_size`), so an operation never waits on a thread *and* a connection. SQLite (and
`memory://`) gets exactly one, a dedicated thread: SQLite admits one writer at a time, and
writers from several threads would wait on the file lock in SQLite's sleep-and-retry busy
handler; one thread serves them in arrival order without polling, and reads (sub-millisecond on
an embedded file) queue behind them.

A cancelled await does not stop an operation that a worker has started: like a sync call
interrupted after the fact, its write either committed or did not.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import itertools
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from turnkeeper.apikeys import ApiKeys
from turnkeeper.config import Settings
from turnkeeper.context.registry import Strategies
from turnkeeper.service.agents import Agents
from turnkeeper.service.core import MAX_PAGE, Through
from turnkeeper.service.facade import Turnkeeper
from turnkeeper.service.transfer import Transfer
from turnkeeper.storage import backend_for
from turnkeeper.storage.base import ApiKeyStore, Store
from turnkeeper.tokens import TokenCounter

__all__ = ["AsyncAgents", "AsyncApiKeys", "AsyncTransfer", "AsyncTurnkeeper", "Workers"]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


class Workers:
    """The bounded thread pool an `AsyncTurnkeeper` runs its operations on.

    The caller's context variables (request ids in the logs) travel with each call, as with
    `asyncio.to_thread`. A cancelled await does not stop an operation already running: like a
    sync call interrupted after the fact, its write either committed or did not.
    """

    def __init__(self, threads: int) -> None:
        if threads < 1:
            raise ValueError("an AsyncTurnkeeper needs at least one worker thread")
        self.threads = threads
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="turnkeeper-async")

    @classmethod
    def for_settings(cls, settings: Settings) -> Workers:
        """One worker per pooled PostgreSQL connection; one dedicated thread for SQLite and
        `memory://` (see the module's docstring)."""
        return cls(backend_for(settings.database_url).threads(settings))

    async def run(self, operation: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """`operation(*args, **kwargs)` on a worker, awaited."""
        call = functools.partial(operation, *args, **kwargs)
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, context.run, call)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False)


class Face(Generic[S]):
    """An async face over a sync object (`sync`) whose operations run on `workers`.

    A subclass names the class it mirrors: `class AsyncAgents(Face[Agents], mirrors=Agents)`.
    Every public method of that class must be on the face, awaited (`Offload`,
    `OffloadIterator`, or an `async def`), except the names in `plain`, which are plain calls
    on both; a method missing is a `TypeError` when the class is made, naming it."""

    def __init_subclass__(
        cls, *, mirrors: type | None = None, plain: Iterable[str] = (), **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        if mirrors is not None:
            _check_mirror(cls, mirrors, frozenset(plain))
        elif Face in cls.__bases__:  # a subclass of a face inherits the face's checked list
            raise TypeError(f"{cls.__name__} must name the class it mirrors (mirrors=...)")

    def __init__(self, sync: S, workers: Workers) -> None:
        self.sync = sync
        """The synchronous object whose operations this face awaits."""
        self._workers = workers


def _check_mirror(face: type, mirrors: type, plain: frozenset[str]) -> None:
    """Raise `TypeError` unless `face` has every public method of `mirrors`, awaited unless
    it is in `plain` (see `Face`)."""
    problems: list[str] = []
    methods: set[str] = set()
    for name in sorted(dir(mirrors)):
        method = inspect.getattr_static(mirrors, name)
        if name.startswith("_") or not inspect.isfunction(method):
            continue
        methods.add(name)
        if not hasattr(face, name):
            problems.append(f"{name} is missing")
        elif _awaited(inspect.getattr_static(face, name)) == (name in plain):
            problems.append(f"{name} must be {'a plain call' if name in plain else 'awaited'}")
    problems += [f"{name} (in plain) is no method of it" for name in sorted(plain - methods)]
    if problems:
        raise TypeError(f"{face.__name__} mirrors {mirrors.__name__}: " + "; ".join(problems))


def _awaited(member: object) -> bool:
    return isinstance(member, Offload | OffloadIterator) or inspect.iscoroutinefunction(member)


class Offload(Generic[P, R]):
    """A sync operation of the face's `sync` object, as a coroutine method of the face.

    The bound attribute is a real `async def` (so `inspect.iscoroutinefunction` holds) with the
    sync method's name, docstring and signature.
    """

    def __init__(self, operation: Callable[Concatenate[Any, P], R]) -> None:
        self.operation = operation
        self.name = operation.__name__
        self.__doc__ = operation.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        if name != self.name:
            raise TypeError(f"{owner.__name__}.{name} must await the sync method of that name")

    @overload
    def __get__(self, face: None, owner: type) -> Offload[P, R]: ...

    @overload
    def __get__(self, face: Face[Any], owner: type) -> Callable[P, Coroutine[Any, Any, R]]: ...

    def __get__(self, face: Face[Any] | None, owner: type) -> Any:
        if face is None:
            return self
        operation: Callable[P, R] = getattr(face.sync, self.name)
        run = face._workers.run

        async def offloaded(*args: P.args, **kwargs: P.kwargs) -> R:
            return await run(operation, *args, **kwargs)

        return _like(offloaded, operation)


class OffloadIterator(Generic[P, S]):
    """A sync operation that returns an iterator, as an async iterator of the face: the sync
    iterator is advanced on the workers a page (`MAX_PAGE` items) at a time."""

    def __init__(self, operation: Callable[Concatenate[Any, P], Iterator[S]]) -> None:
        self.operation = operation
        self.name = operation.__name__
        self.__doc__ = operation.__doc__

    @overload
    def __get__(self, face: None, owner: type) -> OffloadIterator[P, S]: ...

    @overload
    def __get__(self, face: Face[Any], owner: type) -> Callable[P, AsyncIterator[S]]: ...

    def __get__(self, face: Face[Any] | None, owner: type) -> Any:
        if face is None:
            return self
        operation: Callable[P, Iterator[S]] = getattr(face.sync, self.name)
        run = face._workers.run

        async def offloaded(*args: P.args, **kwargs: P.kwargs) -> AsyncIterator[S]:
            items = await run(operation, *args, **kwargs)
            while page := await run(_next_page, items):
                for item in page:
                    yield item

        return _like(offloaded, operation)


class Plain(Through[Callable[P, R]], Generic[P, R]):
    """A sync operation that touches no store, as a plain call on the face: the `sync`
    object's own bound method (`now = Plain(Turnkeeper.now)`), not awaited."""

    def __init__(self, operation: Callable[Concatenate[Any, P], R]) -> None:
        super().__init__("sync")
        self.name = operation.__name__
        self.__doc__ = operation.__doc__


def _next_page(items: Iterator[S]) -> list[S]:
    return list(itertools.islice(items, MAX_PAGE))


def _like(offloaded: Any, operation: Callable[..., Any]) -> Any:
    """`offloaded` named and documented as `operation`, with its signature (minus `self`)."""
    offloaded.__name__ = offloaded.__qualname__ = operation.__name__
    offloaded.__doc__ = operation.__doc__
    offloaded.__signature__ = inspect.signature(operation)
    return offloaded


class AsyncAgents(Face[Agents], mirrors=Agents):
    """`tk.agents` of an `AsyncTurnkeeper`: `Agents`, awaited."""

    position = Offload(Agents.position)
    execution_ms = Offload(Agents.execution_ms)
    set_phase = Offload(Agents.set_phase)
    handoff = Offload(Agents.handoff)
    state = Offload(Agents.state)
    states = Offload(Agents.states)
    update_state = Offload(Agents.update_state)
    responded = Offload(Agents.responded)


class AsyncTransfer(Face[Transfer], mirrors=Transfer):
    """`tk.transfer` of an `AsyncTurnkeeper`: `Transfer`, awaited. A `progress` callback is
    called on the worker thread."""

    export_sessions = Offload(Transfer.export_sessions)
    import_sessions = Offload(Transfer.import_sessions)
    expire = Offload(Transfer.expire)


class AsyncApiKeys(Face[ApiKeys], mirrors=ApiKeys, plain={"remembered"}):
    """`tk.keys` of an `AsyncTurnkeeper`: `ApiKeys`, awaited."""

    store = Through[ApiKeyStore]("sync")
    create = Offload(ApiKeys.create)
    verify = Offload(ApiKeys.verify)
    list_keys = Offload(ApiKeys.list_keys)
    revoke = Offload(ApiKeys.revoke)
    remembered = Plain(ApiKeys.remembered)  # a look in the verified keys, no store read


class AsyncTurnkeeper(Face[Turnkeeper], mirrors=Turnkeeper, plain={"now", "budget_for", "draft"}):
    """Conversation memory for asyncio. Open one with `turnkeeper.open_async()`:

    ```python
    async with turnkeeper.open_async("sqlite:///chat.db") as tk:
        session, _ = await tk.get_or_create_session("support-42")
        await tk.append(session, "user", "Hello!")
        window = await tk.context(session, budget_tokens=8000)
    ```

    Every operation of `Turnkeeper` is here under the same name and signature, awaited; `sync`
    is the `Turnkeeper` it runs (for code that has a thread of its own). `workers` defaults to
    `Workers.for_settings(sync.settings)`: a dedicated thread on SQLite, one per pooled
    connection on PostgreSQL.
    """

    def __init__(self, sync: Turnkeeper, workers: Workers | None = None) -> None:
        super().__init__(sync, workers or Workers.for_settings(sync.settings))
        self.agents = AsyncAgents(sync.agents, self._workers)
        """Multi-agent conversations: agent states, phases, hand-offs, responding."""
        self.transfer = AsyncTransfer(sync.transfer, self._workers)
        """JSONL export and import, and the expiry sweep."""

    @functools.cached_property
    def keys(self) -> AsyncApiKeys:
        """API keys of the HTTP API, stamped with this service's clock."""
        return AsyncApiKeys(self.sync.keys, self._workers)

    # -- what needs no store: plain attributes and calls, as on `Turnkeeper` -----------------

    store = Through[Store]("sync")
    settings = Through[Settings]("sync")
    encoding = Through[str]("sync")
    counter = Through[TokenCounter]("sync")
    strategies = Through[Strategies]("sync")
    now = Plain(Turnkeeper.now)
    budget_for = Plain(Turnkeeper.budget_for)
    draft = Plain(Turnkeeper.draft)

    # -- sessions ---------------------------------------------------------------------------

    get_session = Offload(Turnkeeper.get_session)
    create_session = Offload(Turnkeeper.create_session)
    get_or_create_session = Offload(Turnkeeper.get_or_create_session)
    list_sessions = Offload(Turnkeeper.list_sessions)
    projects_holding = Offload(Turnkeeper.projects_holding)
    iter_session_ids = OffloadIterator(Turnkeeper.iter_session_ids)
    update_session = Offload(Turnkeeper.update_session)
    reset_session = Offload(Turnkeeper.reset_session)
    archive_session = Offload(Turnkeeper.archive_session)
    delete_session = Offload(Turnkeeper.delete_session)
    session_stats = Offload(Turnkeeper.session_stats)
    project_stats = Offload(Turnkeeper.project_stats)
    search = Offload(Turnkeeper.search)
    fork = Offload(Turnkeeper.fork)
    branches = Offload(Turnkeeper.branches)
    fork_origin = Offload(Turnkeeper.fork_origin)
    erase = Offload(Turnkeeper.erase)
    set_legal_hold = Offload(Turnkeeper.set_legal_hold)
    legal_holds = Offload(Turnkeeper.legal_holds)
    held_sessions = Offload(Turnkeeper.held_sessions)

    # -- the message log, context windows, the digest -----------------------------------------

    append = Offload(Turnkeeper.append)
    append_many = Offload(Turnkeeper.append_many)
    append_traced = Offload(Turnkeeper.append_traced)
    history = Offload(Turnkeeper.history)
    pop_last_message = Offload(Turnkeeper.pop_last_message)
    context = Offload(Turnkeeper.context)
    summaries = Offload(Turnkeeper.summaries)
    conversation_context = Offload(Turnkeeper.conversation_context)

    async def run_sync(self, operation: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """`operation(*args, **kwargs)` on this face's workers: for code that calls several
        `sync` operations in a row, in one hop (as the OpenAI Agents adapter does per call)."""
        return await self._workers.run(operation, *args, **kwargs)

    # -- lifetime ---------------------------------------------------------------------------

    async def __aenter__(self) -> AsyncTurnkeeper:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Release the store (on a worker: SQLite's connections belong to their thread), then
        the workers."""
        try:
            await self._workers.run(self.sync.close)
        finally:
            self._workers.shutdown()
