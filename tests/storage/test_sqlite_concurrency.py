"""Several real processes appending to one SQLite session at once lose and duplicate nothing."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

from turnkeeper import open as open_turnkeeper
from turnkeeper.errors import SeqConflict

WRITERS = 6
APPENDS = 60


def _writer(url: str, session_id: str, writer: int, barrier: mp.synchronize.Barrier) -> None:
    with open_turnkeeper(url, sqlite_synchronous="NORMAL") as tk:
        barrier.wait()
        for i in range(APPENDS):
            message_id = f"w{writer}-{i}"
            tk.append(session_id, "user", f"writer {writer} message {i}", id=message_id)
            if i % 10 == 0:  # a retry of the same id must not store it again
                tk.append(session_id, "user", "retry", id=message_id)


def _optimistic_writer(url: str, session_id: str, writer: int, out: mp.Queue[int]) -> None:
    """Appends only on top of the seq it last saw; counts the conflicts it hit."""
    conflicts = 0
    with open_turnkeeper(url, sqlite_synchronous="NORMAL") as tk:
        done = 0
        while done < 20:
            last = tk.get_session(session_id).last_seq
            try:
                tk.append(session_id, "assistant", f"{writer}:{done}", expected_last_seq=last)
                done += 1
            except SeqConflict:
                conflicts += 1
    out.put(conflicts)


def _run(target: object, args_for: list[tuple[object, ...]]) -> None:
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=target, args=args) for args in args_for]  # type: ignore[attr-defined]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=300)
        assert proc.exitcode == 0


@pytest.mark.slow
def test_concurrent_processes_keep_seq_gapless_with_nothing_lost_or_duplicated(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'concurrent.db'}"
    with open_turnkeeper(url) as tk:
        session = tk.create_session(key="busy")
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(WRITERS)
    _run(_writer, [(url, session.id, w, barrier) for w in range(WRITERS)])
    with open_turnkeeper(url) as tk:
        messages = tk.history(session.id)
        stored = tk.get_session(session.id)
    assert [m.seq for m in messages] == list(range(1, WRITERS * APPENDS + 1))
    ids = [m.id for m in messages]
    assert len(set(ids)) == len(ids) == WRITERS * APPENDS
    assert set(ids) == {f"w{w}-{i}" for w in range(WRITERS) for i in range(APPENDS)}
    for w in range(WRITERS):  # each writer's own messages keep their order
        own = [int(m.id.split("-")[1]) for m in messages if m.id.startswith(f"w{w}-")]
        assert own == sorted(own)
    assert stored.message_count == stored.last_seq == WRITERS * APPENDS
    assert stored.stored_tokens == sum(m.tokens for m in messages)


@pytest.mark.slow
def test_expected_last_seq_lets_exactly_one_of_racing_writers_win_each_slot(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'optimistic.db'}"
    with open_turnkeeper(url) as tk:
        session = tk.create_session()
    ctx = mp.get_context("spawn")
    out: mp.Queue[int] = ctx.Queue()
    _run(_optimistic_writer, [(url, session.id, w, out) for w in range(4)])
    with open_turnkeeper(url) as tk:
        messages = tk.history(session.id)
    assert [m.seq for m in messages] == list(range(1, 81))
    assert sorted(m.content for m in messages) == sorted(
        f"{w}:{i}" for w in range(4) for i in range(20)
    )
