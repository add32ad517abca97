"""`Turnkeeper`: every operation turnkeeper offers, over any `Store`, behind one object.

The CLI, the HTTP API, the UI and the framework adapters are thin shells over it: they parse
input, call one method and format the result. Validation, token counting at write time,
session-reference resolution (id or key), expiry rules and context building all live behind
it, so every interface behaves the same.

The object is composed of parts over one `Core` (the store, the settings, the clock, the
summarizer and session resolution), one module each; it inherits from none of them:

- flat on `tk` (what every app calls), each operation handed to its part: sessions
  (`sessions.py`), the message log (`messages.py`), context windows (`windows.py`), the
  conversation digest (`digest.py`), search (`search.py`) and branches (`branches.py`);
- `tk.agents` (`agents.py`): agent states, phase changes, hand-offs, responding;
- flat on `tk` too, erasure and legal holds (`erasure.py`);
- `tk.transfer` (`transfer.py`): JSONL export and import, the expiry sweep;
- `tk.strategies` (`context.strategies`): the context strategies known by name;
- `tk.keys`: API keys (`turnkeeper.apikeys`), on the service's clock.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import datetime
from functools import cached_property
from typing import Concatenate, ParamSpec, TypeVar

from turnkeeper.apikeys import ApiKeys
from turnkeeper.config import Settings
from turnkeeper.context.registry import Strategies
from turnkeeper.context.summarizer import Summarizer
from turnkeeper.service.agents import Agents
from turnkeeper.service.branches import Branches
from turnkeeper.service.core import Core, Through, utcnow
from turnkeeper.service.digest import Digest
from turnkeeper.service.erasure import Erasure
from turnkeeper.service.messages import Messages
from turnkeeper.service.search import Search
from turnkeeper.service.sessions import Sessions
from turnkeeper.service.transfer import Transfer
from turnkeeper.service.windows import Windows
from turnkeeper.storage.base import Store
from turnkeeper.tokens import TokenCounter

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


def _handed_to(
    part: str, operation: Callable[Concatenate[S, P], R]
) -> Callable[Concatenate[Turnkeeper, P], R]:
    """`operation` of the part in attribute `part`, as a method of `Turnkeeper`: same name,
    signature and docstring (`inspect.signature` and `help` show the part's)."""

    @functools.wraps(operation)
    def handed_to(tk: Turnkeeper, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return operation(getattr(tk, part), *args, **kwargs)

    handed_to.__qualname__ = f"Turnkeeper.{operation.__name__}"
    return handed_to


class Turnkeeper(AbstractContextManager["Turnkeeper"]):
    """Conversation memory over a store. Open one with `turnkeeper.open()`.

    Usable as a context manager (leaving it closes it); `close()` releases the store.
    """

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        clock: Callable[[], datetime] = utcnow,
        summarizer: Summarizer | None = None,
    ) -> None:
        self._core = core = Core(store, settings, clock=clock, summarizer=summarizer)
        self._messages = Messages(core)
        self.agents = Agents(core, self._messages)
        """Multi-agent conversations: agent states, phases, hand-offs, responding."""
        self._sessions = Sessions(core, self.agents)
        self._windows = Windows(core, self._messages, self.agents)
        self._digest = Digest(core)
        self._search = Search(core)
        self._branches = Branches(core)
        self._erasure = Erasure(core, forget=self._windows.forget)
        self.transfer = Transfer(self)
        """JSONL export and import, and the expiry sweep."""

    store = Through[Store]("_core")
    settings = Through[Settings]("_core")
    encoding = Through[str]("_core")
    """Encoding the stored token counts were made with (fixed when the database was made)."""
    counter = Through[TokenCounter]("_core")
    """The tokenizer stored counts are made with."""
    strategies = Through[Strategies]("_windows")
    """The context strategies this service knows by name: the built-ins, and any
    registered (`tk.strategies.register(MyStrategy())`)."""

    @cached_property
    def keys(self) -> ApiKeys:
        """API keys of the HTTP API, stamped with this service's clock; verified keys are
        remembered for `api_key_cache`."""
        return ApiKeys(self.store, clock=self._core.clock, cache=self.settings.api_key_cache)

    now = _handed_to("_core", Core.now)
    get_session = _handed_to("_core", Core.get_session)

    # -- sessions, search and branches ------------------------------------------------------

    create_session = _handed_to("_sessions", Sessions.create_session)
    get_or_create_session = _handed_to("_sessions", Sessions.get_or_create_session)
    list_sessions = _handed_to("_sessions", Sessions.list_sessions)
    projects_holding = _handed_to("_sessions", Sessions.projects_holding)
    update_session = _handed_to("_sessions", Sessions.update_session)
    reset_session = _handed_to("_sessions", Sessions.reset_session)
    archive_session = _handed_to("_sessions", Sessions.archive_session)
    delete_session = _handed_to("_sessions", Sessions.delete_session)
    session_stats = _handed_to("_sessions", Sessions.session_stats)
    project_stats = _handed_to("_sessions", Sessions.project_stats)
    search = _handed_to("_search", Search.search)
    fork = _handed_to("_branches", Branches.fork)
    branches = _handed_to("_branches", Branches.branches)
    fork_origin = _handed_to("_branches", Branches.fork_origin)

    # -- erasure and legal holds ------------------------------------------------------------

    erase = _handed_to("_erasure", Erasure.erase)
    set_legal_hold = _handed_to("_erasure", Erasure.set_legal_hold)
    legal_holds = _handed_to("_erasure", Erasure.legal_holds)
    held_sessions = _handed_to("_erasure", Erasure.held_sessions)

    def iter_session_ids(self, *, project: str | None = None) -> Iterator[str]:
        """Ids of every session (of `project`), paging through the listing."""
        yield from self._sessions.iter_session_ids(project=project)  # a generator, as the part's

    # -- the message log, context windows, the digest ---------------------------------------

    draft = _handed_to("_messages", Messages.draft)
    append = _handed_to("_messages", Messages.append)
    append_many = _handed_to("_messages", Messages.append_many)
    append_traced = _handed_to("_messages", Messages.append_traced)
    history = _handed_to("_messages", Messages.history)
    pop_last_message = _handed_to("_messages", Messages.pop_last_message)
    budget_for = _handed_to("_windows", Windows.budget_for)
    context = _handed_to("_windows", Windows.context)
    summaries = _handed_to("_digest", Digest.summaries)
    conversation_context = _handed_to("_digest", Digest.conversation_context)

    # -- lifetime ---------------------------------------------------------------------------

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()
