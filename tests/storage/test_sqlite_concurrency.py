"""Several real processes appending to one SQLite session at once lose and duplicate nothing."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path
from typing import Any

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
            text = f"writer {writer} message {i}"
            tk.append(session_id, "user", text, id=message_id)
            if i % 10 == 0:  # a retry of the same id must not store it again
                tk.append(session_id, "user", text, id=message_id)


ROUNDS = 10
OPTIMISTS = 4


def _optimistic_writer(
    url: str, session_id: str, writer: int, barrier: mp.synchronize.Barrier, out: mp.Queue[Any]
) -> None:
    """Each round: read the last seq, wait until every writer has read it too, then append on
    top of it. Reports (round, seq seen, seq stored or None after a `SeqConflict`)."""
    results = []
    with open_turnkeeper(url, sqlite_synchronous="NORMAL") as tk:
        for round_ in range(ROUNDS):
            last = tk.get_session(session_id).last_seq
            barrier.wait()  # everyone saw the same last seq: all but one must lose
            try:
                stored = tk.append(
                    session_id, "assistant", f"{writer}:{round_}", expected_last_seq=last
                )
                results.append((round_, last, stored.seq))
            except SeqConflict:
                results.append((round_, last, None))
            barrier.wait()  # the round is over for everyone before anyone reads again
    out.put(results)


NEW_FILES = 150
OPENERS = 4


def _opener(
    directory: str, opener: int, barrier: mp.synchronize.Barrier, out: mp.Queue[Any]
) -> None:
    """For each new file: wait until every opener is ready, then open it and append. Reports
    how many failed and the first few errors (a bounded message, so the queue never holds the
    process back from exiting) instead of raising, so the parent can show them."""
    errors = []
    for n in range(NEW_FILES):
        barrier.wait()
        try:
            with open_turnkeeper(f"sqlite:///{directory}/new-{n}.db") as tk:
                tk.append(tk.create_session(key=f"opener-{opener}").id, "user", "hi")
        except Exception as exc:  # every failure is the finding
            errors.append(f"file {n}: {type(exc).__name__}: {exc}")
    out.put((len(errors), errors[:3]))


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
    barrier = ctx.Barrier(OPTIMISTS)
    out: mp.Queue[Any] = ctx.Queue()
    _run(_optimistic_writer, [(url, session.id, w, barrier, out) for w in range(OPTIMISTS)])
    results = [entry for _ in range(OPTIMISTS) for entry in out.get(timeout=60)]
    for round_ in range(ROUNDS):
        entries = [(last, seq) for r, last, seq in results if r == round_]
        assert {last for last, _ in entries} == {round_}  # all saw the same slot
        won = [seq for _, seq in entries if seq is not None]
        assert won == [round_ + 1], f"round {round_}: {len(won)} writers won the slot"
    with open_turnkeeper(url) as tk:
        messages = tk.history(session.id)
    assert [m.seq for m in messages] == list(range(1, ROUNDS + 1))
    assert [int(m.content.split(":")[1]) for m in messages] == list(range(ROUNDS))


@pytest.mark.slow
def test_processes_opening_one_new_file_together_all_open_it(tmp_path: Path) -> None:
    """The workers of `serve --workers N` open one new file at the same instant. Switching a
    new file to WAL answers SQLITE_BUSY at once, without SQLite's busy handler; that must be
    waited out, not reported as "database is locked" (one worker in ~30 starts used to die of
    it, and took the service down with it)."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(OPENERS)
    out: mp.Queue[Any] = ctx.Queue()
    _run(_opener, [(str(tmp_path), w, barrier, out) for w in range(OPENERS)])
    reports = [out.get(timeout=60) for _ in range(OPENERS)]
    assert sum(failed for failed, _ in reports) == 0, [e for _, first in reports for e in first]
    for n in (0, NEW_FILES - 1):
        with open_turnkeeper(f"sqlite:///{tmp_path}/new-{n}.db") as tk:
            assert sorted(s.key for s in tk.list_sessions().items) == [
                f"opener-{w}" for w in range(OPENERS)
            ]
