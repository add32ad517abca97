"""The store's cache never changes a window.

Two services share one database: `cached` as `turnkeeper.open` makes it (the version-keyed
store cache on, so it remembers the pages builds read) and `plain` with the caches off
(`lru_size=0`), which reads everything from the store. Hypothesis drives random appends (batches, retries, internal notes,
tool calls), edits, pops, resets, branches and context builds under every strategy; most writes
go through `cached`, some through `plain` (another replica writing behind its back). After
every build, both services must hand out the very same window, report included.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

import turnkeeper
from tests.postgres_schemas import blank_schema
from turnkeeper.cache.store import CachedStore
from turnkeeper.errors import ContextBudgetExceeded
from turnkeeper.service import Turnkeeper
from turnkeeper.types import NewMessage, StrategyName

texts = st.one_of(
    st.sampled_from(["Where to?", "Lisbon.", "ok", "What about Porto?", "Über café 東京 🚆"]),
    st.text(alphabet="abcdefghij klmnop,.?!\n", min_size=1, max_size=120).filter(str.strip),
)
writers = st.sampled_from(["cached", "cached", "cached", "plain"])


class CachedWindows(RuleBasedStateMachine):
    """The operations, applied once to the shared database; every build made by both."""

    cached: Turnkeeper
    plain: Turnkeeper

    def __init__(self) -> None:
        super().__init__()
        self.sessions: list[str] = []
        self.ids = 0

    @initialize()
    def start(self) -> None:
        session = self.cached.create_session(project="windows")
        self.sessions.append(session.id)

    def _writer(self, name: str) -> Turnkeeper:
        return self.cached if name == "cached" else self.plain

    def _new_id(self) -> str:
        self.ids += 1
        return f"m{self.ids}"

    @rule(
        pick=st.integers(0, 99),
        writer=writers,
        role=st.sampled_from(["user", "assistant", "system"]),
        text=texts,
        internal=st.booleans(),
        batch=st.integers(1, 3),
    )
    def append(
        self, pick: int, writer: str, role: str, text: str, internal: bool, batch: int
    ) -> None:
        session = self.sessions[pick % len(self.sessions)]
        messages = [
            NewMessage(role, f"{text} {n}", id=self._new_id(), internal=internal and n == 0)
            for n in range(batch)
        ]
        self._writer(writer).append_many(session, messages)

    @rule(
        pick=st.integers(0, 99),
        text=texts,
        strategy=st.sampled_from(list(StrategyName)),
        budget_tokens=st.integers(30, 3000),
    )
    def turn(self, pick: int, text: str, strategy: StrategyName, budget_tokens: int) -> None:
        """The common loop: append a turn, build the context."""
        session = self.sessions[pick % len(self.sessions)]
        self.cached.append(session, "user", text, id=self._new_id())
        args = {"strategy": strategy, "budget_tokens": budget_tokens}
        assert _window(self.cached, session, args) == _window(self.plain, session, args)

    @rule(pick=st.integers(0, 99), writer=writers, text=texts)
    def tool_call(self, pick: int, writer: str, text: str) -> None:
        session = self.sessions[pick % len(self.sessions)]
        call = self._new_id()
        tk = self._writer(writer)
        tk.append(
            session, "assistant", "", id=self._new_id(),
            tool_calls=[{"id": call, "type": "function",
                         "function": {"name": "look", "arguments": "{}"}}],
        )  # fmt: skip
        tk.append(session, "tool", text, id=self._new_id(), tool_call_id=call)

    @rule(pick=st.integers(0, 99), writer=writers, back=st.integers(1, 5))
    def retry(self, pick: int, writer: str, back: int) -> None:
        """An append of a stored message again (same id and content): nothing is stored."""
        session = self.sessions[pick % len(self.sessions)]
        stored = self.plain.history(session, newest_first=True, limit=back)
        if stored:
            old = stored[-1]
            self._writer(writer).append(
                session, old.role, old.content, id=old.id, internal=old.internal,
                author=old.author, tool_calls=old.tool_calls, tool_call_id=old.tool_call_id,
                metadata=old.metadata,
            )  # fmt: skip

    @rule(pick=st.integers(0, 99), writer=writers, title=texts)
    def edit(self, pick: int, writer: str, title: str) -> None:
        self._writer(writer).update_session(self.sessions[pick % len(self.sessions)], title=title)

    @rule(pick=st.integers(0, 99), writer=writers)
    def pop(self, pick: int, writer: str) -> None:
        self._writer(writer).pop_last_message(self.sessions[pick % len(self.sessions)])

    @rule(pick=st.integers(0, 99), writer=writers, keep=st.booleans())
    def reset(self, pick: int, writer: str, keep: bool) -> None:
        session = self.sessions[pick % len(self.sessions)]
        self._writer(writer).reset_session(session, keep_system_message=keep)

    @rule(pick=st.integers(0, 99), writer=writers, at=st.integers(0, 30))
    def branch(self, pick: int, writer: str, at: int) -> None:
        source = self.cached.get_session(self.sessions[pick % len(self.sessions)])
        if len(self.sessions) < 4:
            branch = self._writer(writer).fork(source.id, min(at, source.last_seq))
            self.sessions.append(branch.id)

    @rule(
        pick=st.integers(0, 99),
        strategy=st.sampled_from(list(StrategyName)),
        budget_tokens=st.one_of(st.none(), st.integers(30, 400), st.integers(400, 3000)),
        keep_recent=st.integers(1, 8),
        include_internal=st.sampled_from([None, None, True, False]),
        model=st.sampled_from([None, None, "gpt-4"]),
        pending=st.one_of(st.none(), texts),
        twice=st.booleans(),
    )
    def build(
        self,
        pick: int,
        strategy: StrategyName,
        budget_tokens: int | None,
        keep_recent: int,
        include_internal: bool | None,
        model: str | None,
        pending: str | None,
        twice: bool,
    ) -> None:
        args: dict[str, Any] = {
            "strategy": strategy, "budget_tokens": budget_tokens, "keep_recent": keep_recent,
            "include_internal": include_internal, "model": model,
            "new_message": None if pending is None else NewMessage("user", pending, id="pending"),
        }  # fmt: skip
        session = self.sessions[pick % len(self.sessions)]
        for _ in range(2 if twice else 1):
            assert _window(self.cached, session, args) == _window(self.plain, session, args)


def _window(tk: Turnkeeper, session: str, args: dict[str, Any]) -> Any:
    try:
        return tk.context(session, **args)
    except ContextBudgetExceeded as exc:
        return ("budget exceeded", str(exc))


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'windows.db'}"
    else:
        with blank_schema(request.getfixturevalue("postgres_server")) as url:
            yield url


def test_windows_built_through_the_cache_are_the_windows_read_from_the_store(
    database_url: str,
) -> None:
    with ExitStack() as stack:
        cached = stack.enter_context(turnkeeper.open(database_url, session_expiration=None))
        plain = stack.enter_context(
            turnkeeper.open(database_url, session_expiration=None, lru_size=0)
        )
        assert isinstance(cached.store, CachedStore) and not isinstance(plain.store, CachedStore)

        class Run(CachedWindows):
            pass

        Run.cached = cached
        Run.plain = plain
        run_state_machine_as_test(
            Run,
            settings=settings(
                max_examples=40,
                stateful_step_count=60,
                derandomize=True,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
