"""SQLite writers in one process take turns in one first-come, first-served queue per file.

The queue (`turnkeeper.storage.sql.write_queue`) is held in these tests by the test itself where a
writer must be seen waiting: whether a writer waits is read from the queue (`waiting`), never
from a clock, so nothing here depends on the machine's speed.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest

import turnkeeper
from turnkeeper.config import Settings
from turnkeeper.errors import BackendUnavailable
from turnkeeper.service import Turnkeeper
from turnkeeper.storage.sql.sqlite import SQLiteStore
from turnkeeper.storage.sql.write_queue import WriteQueue, lock_file_of, queue_for

THREADS = 8
APPENDS = 25
PATIENCE = 60.0
"""How long a test waits for a thread to reach a state before it fails (never a measure)."""


def _start(target: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def _until(condition: Callable[[], bool]) -> None:
    """Wait until `condition()` holds (it is a state the test knows will come)."""
    done = threading.Event()
    for _ in range(int(PATIENCE * 200)):
        if condition():
            return
        done.wait(0.005)
    raise AssertionError("the awaited state never came")


def _join(*threads: threading.Thread) -> None:
    for thread in threads:
        thread.join(PATIENCE)
        assert not thread.is_alive()


@contextmanager
def _held(queue: WriteQueue) -> Iterator[None]:
    """Hold `queue` as a writer would, so everyone else's writes wait for their turn."""
    assert queue.acquire(timeout=0)
    try:
        yield
    finally:
        queue.release()


def test_threads_appending_to_one_session_and_to_their_own_keep_seqs_gapless(
    tmp_path: Path,
) -> None:
    with turnkeeper.open(f"sqlite:///{tmp_path / 'threads.db'}") as tk:  # the defaults: cache on
        shared = tk.create_session(key="shared")
        own = [tk.create_session(key=f"own-{n}") for n in range(THREADS)]
        errors: list[BaseException] = []

        def writer(n: int) -> None:
            try:
                for i in range(APPENDS):
                    tk.append(shared.id, "user", f"{n}:{i}", id=f"w{n}-{i}")
                    tk.append(own[n].id, "user", f"{i}")
            except BaseException as exc:  # reported by the test thread below
                errors.append(exc)

        _join(*[_start(lambda n=n: writer(n)) for n in range(THREADS)])
        assert errors == []
        messages = tk.history(shared.id)
        assert [m.seq for m in messages] == list(range(1, THREADS * APPENDS + 1))
        assert {m.id for m in messages} == {
            f"w{n}-{i}" for n in range(THREADS) for i in range(APPENDS)
        }
        for n in range(THREADS):  # each writer's messages in its own order
            mine = [int(m.content.split(":")[1]) for m in messages if m.id.startswith(f"w{n}-")]
            assert mine == list(range(APPENDS))
            history = tk.history(own[n].id)
            assert [(m.seq, m.content) for m in history] == [
                (i + 1, f"{i}") for i in range(APPENDS)
            ]
            assert tk.get_session(own[n].id).message_count == APPENDS
        assert tk.get_session(shared.id).message_count == THREADS * APPENDS


def test_waiting_writers_get_their_turns_in_the_order_they_came(tmp_path: Path) -> None:
    """Fails without the queue: SQLite's busy handler lets whoever retries first win."""
    path = tmp_path / "fifo.db"
    with turnkeeper.open(f"sqlite:///{path}") as tk:
        session = tk.create_session()
        queue = queue_for(path)
        writers = []
        with _held(queue):
            for n in range(THREADS):
                writers.append(_start(lambda n=n: tk.append(session.id, "user", f"writer {n}")))
                _until(lambda n=n: queue.waiting == n + 1)  # it queued behind the others
            # A read does not queue: WAL readers run beside the writer.
            assert tk.history(session.id) == []
        _join(*writers)
        assert [m.content for m in tk.history(session.id)] == [
            f"writer {n}" for n in range(THREADS)
        ]


def test_two_stores_on_one_file_share_one_queue(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    (tmp_path / "alias").symlink_to(tmp_path)
    with (
        turnkeeper.open(f"sqlite:///{path}") as first,
        turnkeeper.open(f"sqlite:///{tmp_path / 'alias' / 'shared.db'}") as second,
    ):
        session = first.create_session()
        queue = queue_for(path)
        with _held(queue):
            a = _start(lambda: first.append(session.id, "user", "from the first store"))
            _until(lambda: queue.waiting == 1)
            b = _start(lambda: second.append(session.id, "user", "from the second store"))
            _until(lambda: queue.waiting == 2)  # the second store's writer waits in the same line
            assert first.history(session.id) == second.history(session.id) == []
        _join(a, b)
        assert [(m.seq, m.content) for m in second.history(session.id)] == [
            (1, "from the first store"),
            (2, "from the second store"),
        ]


def test_a_writer_whose_turn_does_not_come_within_the_busy_timeout_is_told_so(
    tmp_path: Path, settings: Settings
) -> None:
    path = tmp_path / "slow.db"
    store = SQLiteStore(f"sqlite:///{path}", busy_timeout=timedelta(milliseconds=50))
    try:
        tk = Turnkeeper(store, settings)
        session = tk.create_session()
        with _held(queue_for(path)), pytest.raises(BackendUnavailable, match="is busy"):
            tk.append(session.id, "user", "never stored")
        tk.append(session.id, "user", "stored once the queue is free")
        assert [m.content for m in tk.history(session.id)] == ["stored once the queue is free"]
    finally:
        store.close()


HOLD_WRITE_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


def test_another_process_holding_the_write_lock_past_the_busy_timeout_is_a_clear_error(
    tmp_path: Path, settings: Settings
) -> None:
    path = tmp_path / "other-process.db"
    store = SQLiteStore(f"sqlite:///{path}", busy_timeout=timedelta(milliseconds=100))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITE_LOCK, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        tk = Turnkeeper(store, settings)
        session = tk.create_session()
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(BackendUnavailable, match=f"{path.name} is busy"):
            tk.append(session.id, "user", "never stored")
        holder.stdin.write("\n")
        holder.stdin.close()
        assert holder.wait(PATIENCE) == 0
        # The queue was given back: the next write takes its turn and SQLite's lock at once.
        tk.append(session.id, "user", "stored")
        assert [m.content for m in tk.history(session.id)] == ["stored"]
        assert queue_for(path).waiting == 0
    finally:
        holder.kill()
        holder.wait()
        store.close()


HOLD_WRITERS_FILE = """
import fcntl, sys
with open(sys.argv[1], "a+b") as handle:
    fcntl.flock(handle, fcntl.LOCK_EX)
    print("held", flush=True)
    sys.stdin.readline()
"""


@pytest.mark.skipif(sys.platform == "win32", reason="the writers' file lock is POSIX flock")
def test_writers_of_another_process_are_waited_for_at_the_writers_file_lock(
    tmp_path: Path, settings: Settings
) -> None:
    """With `writer_lock_file` (what `serve --workers N` sets), a process whose writer has its
    turn holds `<db>-writers.lock`: this process's writers wait for it (within the busy
    timeout) even though SQLite's own lock is free."""
    path = tmp_path / "processes.db"
    store = SQLiteStore(
        f"sqlite:///{path}", busy_timeout=timedelta(milliseconds=100), writer_lock_file=True
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITERS_FILE, str(lock_file_of(path))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        tk = Turnkeeper(store, settings)
        session = tk.create_session()
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline() == "held\n"
        for _ in range(2):  # the second try finds its request to the lock's taker given up
            with pytest.raises(BackendUnavailable, match="no turn to write"):
                tk.append(session.id, "user", "never stored")
        assert tk.history(session.id) == []  # reads do not wait for writers
        holder.stdin.write("\n")
        holder.stdin.close()
        assert holder.wait(PATIENCE) == 0
        tk.append(session.id, "user", "stored")
        assert [m.content for m in tk.history(session.id)] == ["stored"]
    finally:
        holder.kill()
        holder.wait()
        store.close()


def test_without_the_option_a_writer_does_not_wait_for_the_writers_file_lock(
    tmp_path: Path, settings: Settings
) -> None:
    path = tmp_path / "library.db"
    store = SQLiteStore(f"sqlite:///{path}", busy_timeout=timedelta(milliseconds=100))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITERS_FILE, str(lock_file_of(path))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        tk = Turnkeeper(store, settings)
        session = tk.create_session()
        tk.append(session.id, "user", "stored")  # SQLite's lock alone decides
        assert [m.content for m in tk.history(session.id)] == ["stored"]
    finally:
        holder.kill()
        holder.wait()
        store.close()


def test_a_waiter_that_gives_up_leaves_the_line_and_the_others_keep_their_order() -> None:
    queue = WriteQueue()
    order: list[str] = []

    def writer(name: str, timeout: float) -> None:
        if queue.acquire(timeout):
            order.append(name)
            queue.release()
        else:
            order.append(f"{name} gave up")

    assert queue.acquire(timeout=0)
    first = _start(lambda: writer("first", PATIENCE))
    _until(lambda: queue.waiting == 1)
    quitter = _start(lambda: writer("quitter", 0.01))
    _join(quitter)  # it gave up while the queue was held
    last = _start(lambda: writer("last", PATIENCE))
    _until(lambda: queue.waiting == 2)
    queue.release()
    _join(first, last)
    assert order == ["quitter gave up", "first", "last"]
    assert queue.waiting == 0 and queue.acquire(timeout=0)  # free again
    queue.release()


def test_each_database_file_has_its_own_queue(tmp_path: Path) -> None:
    one, other = queue_for(tmp_path / "one.db"), queue_for(tmp_path / "other.db")
    assert one is not other
    assert queue_for(tmp_path / "." / "one.db") is one
