"""Durable rolling summaries: each message is summarized once, across turns, restarts and
concurrent builds; a failing summarizer never fails the turn."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from tests.conftest import Clock, make_sqlite_store
from tests.context.helpers import Failing
from turnkeeper.config import Settings
from turnkeeper.context.selection import SUMMARY_PREFIX
from turnkeeper.context.summarizer import ExtractiveSummarizer, Summarizer
from turnkeeper.logs import capture_events
from turnkeeper.service import Turnkeeper
from turnkeeper.tokens import TokenCounter
from turnkeeper.types import Message, NewMessage, Session


class CountingSummarizer:
    """The extractive summarizer, counting how often each seq is read into it."""

    method = "counting"

    def __init__(self, *, delay: float = 0.0) -> None:
        self.inner = ExtractiveSummarizer()
        self.reads: Counter[int] = Counter()
        self.calls = 0
        self.delay = delay
        self._lock = threading.Lock()

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        counter: TokenCounter,
        previous: str | None = None,
    ) -> str:
        with self._lock:
            self.calls += 1
            self.reads.update(m.seq for m in messages)
        time.sleep(self.delay)
        return self.inner.summarize(
            messages, max_tokens=max_tokens, counter=counter, previous=previous
        )


def _open(path: Path, settings: Settings, clock: Clock, summarizer: Summarizer) -> Turnkeeper:
    return Turnkeeper(make_sqlite_store(path), settings, clock=clock, summarizer=summarizer)


def _questions(tk: Turnkeeper, session: Session, count: int = 60) -> None:
    """`count` user questions of about 25 tokens each: well over an 800-token budget."""
    tk.append_many(
        session, [NewMessage("user", f"question {i} " + "w " * 20) for i in range(count)]
    )


def _summarized(tk: Turnkeeper, session_id: str) -> list[int]:
    window = tk.context(session_id, strategy="summarize", budget_tokens=800, keep_recent=10)
    assert any(m.content.startswith(SUMMARY_PREFIX) for m in window.messages)
    return list(window.report.summarized_seqs)


def test_a_thousand_messages_summarized_in_steps_read_each_message_once(
    tmp_path: Path, settings: Settings, clock: Clock
) -> None:
    counting = CountingSummarizer()
    tk = _open(tmp_path / "s.db", settings, clock, counting)
    session = tk.create_session(key="long")
    tk.append(session, "system", "You are helpful.")
    covered: set[int] = set()
    for step in range(20):
        tk.append_many(
            session,
            [NewMessage("user" if i % 2 else "assistant", f"message {step}.{i} " + "w " * 10)
             for i in range(50)],
        )  # fmt: skip
        covered.update(_summarized(tk, session.id))
    assert tk.get_session(session.id).message_count == 1001
    assert set(counting.reads) == covered and max(counting.reads.values()) == 1
    assert len(covered) > 900
    assert len(tk.summaries(session)) == 20


def test_a_restart_resumes_from_the_stored_checkpoint(
    tmp_path: Path, settings: Settings, clock: Clock
) -> None:
    first = CountingSummarizer()
    tk = _open(tmp_path / "s.db", settings, clock, first)
    session = tk.create_session(key="restart")
    _questions(tk, session)
    _summarized(tk, session.id)
    # enough later turns that the verbatim tail from the cut point overflows keep_recent (10):
    # the cut moves and the summary must cover more
    tk.append_many(session, [NewMessage("user", f"later {i} " + "w " * 20) for i in range(12)])

    second = CountingSummarizer()
    reopened = _open(tmp_path / "s.db", settings, clock, second)
    _summarized(reopened, session.id)
    assert not set(first.reads) & set(second.reads)
    assert 0 < len(second.reads) <= 10 + 12  # at most the old verbatim tail and the new turns


def test_concurrent_builds_make_one_checkpoint_per_range(
    tmp_path: Path, settings: Settings, clock: Clock
) -> None:
    counting = CountingSummarizer(delay=0.2)
    tk = _open(tmp_path / "s.db", settings, clock, counting)
    session = tk.create_session(key="race")
    _questions(tk, session)
    windows: list[list[str]] = []

    def build() -> None:
        window = tk.context(session.id, strategy="summarize", budget_tokens=800, keep_recent=10)
        windows.append([m.content for m in window.messages])

    threads = [threading.Thread(target=build) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counting.calls == 1
    assert len(tk.summaries(session)) == 1
    assert all(window == windows[0] for window in windows)


def test_reset_deletes_the_checkpoints(tmp_path: Path, settings: Settings, clock: Clock) -> None:
    tk = _open(tmp_path / "s.db", settings, clock, CountingSummarizer())
    session = tk.create_session(key="reset")
    _questions(tk, session)
    _summarized(tk, session.id)
    tk.reset_session(session)
    assert tk.summaries(session) == []


@pytest.mark.parametrize("with_system", [True, False])
def test_a_failing_summarizer_falls_back_to_the_sliding_window_result(
    tmp_path: Path, settings: Settings, clock: Clock, with_system: bool
) -> None:
    tk = _open(tmp_path / "s.db", settings, clock, Failing())
    session = tk.create_session(key="fail")
    if with_system:
        tk.append(session, "system", "You are helpful.")
    _questions(tk, session)
    before = _summary_failures()
    with capture_events() as logs:
        window = tk.context(session, strategy="summarize", budget_tokens=800, keep_recent=10)
    sliding = tk.context(session, strategy="sliding_window", budget_tokens=800)
    assert window.messages == sliding.messages
    assert _summary_failures() == before + 1
    assert any(log["event"] == "summary_failed" for log in logs)


def _summary_failures() -> float:
    return REGISTRY.get_sample_value("turnkeeper_summary_failures_total") or 0.0
