"""One first-come, first-served queue of writers per SQLite database file in this process.

SQLite admits one writer at a time. A writer that finds the write lock taken waits in SQLite's
busy handler, which sleeps and retries with a growing back-off (1, 2, 5 … 100 ms): the order
writers arrived in is lost, a writer that just missed the lock may sleep while later ones get
it, and under many concurrent writers the slowest waits become seconds. So the SQLite store's
writers first queue here, in arrival order, and only the head of the queue runs
`BEGIN IMMEDIATE`. The queue is handed from one writer to the next (a ticket lock: a releasing
writer gives its turn to the oldest waiter; nobody overtakes), which `threading.Lock` does not
promise.

Every store and connection on one file in the process shares the file's queue (keyed by the
resolved path), so two stores opened on one database order their writers together. Reads never
queue (WAL readers run beside the writer).

Across processes, when asked (`across_processes`; `turnkeeper serve --workers N` asks), the head
of each process's queue then takes an exclusive `flock` on `<database>-writers.lock`, whose
waiter the kernel wakes the moment it is free, instead of meeting the other processes' heads in
SQLite's sleeping busy handler (measured: bench/results/http-sqlite-queue.md). It is not on by
default: two system calls per write that a single process does not need. That lock only orders:
SQLite's own lock still excludes, so a process that does not take it (an older turnkeeper, the
`sqlite3` shell) is still safe, and no lock is ever awaited while holding a later one (queue →
file → SQLite's lock), so waits cannot form a cycle. Where `fcntl` is missing (Windows) the
processes meet at SQLite's lock alone.
"""

from __future__ import annotations

import os
import queue
import threading
import time
import weakref
from collections import deque
from pathlib import Path
from typing import IO


class WriteQueue:
    """A fair (FIFO) lock with a timeout: `acquire(timeout)` is False when this thread's turn
    did not come within `timeout` seconds; `release()` hands the turn on. With `lock_file`, a
    turn also holds that file's lock, which orders the queues of several processes."""

    def __init__(self, lock_file: Path | None = None) -> None:
        self._guard = threading.Lock()
        self._waiters: deque[threading.Lock] = deque()
        self._held = False
        self._across = ProcessLock(lock_file) if lock_file is not None else None

    def order_processes(self, lock_file: Path) -> None:
        """From now on a turn also holds `lock_file`'s lock (once asked, for every store on
        the file: one of them ordering against other processes orders them all)."""
        with self._guard:
            if self._across is None:
                self._across = ProcessLock(lock_file)

    def acquire(self, timeout: float) -> bool:
        """Wait for this thread's turn, at most `timeout` seconds in all; True once it is ours."""
        if self._across is None:  # one process's order only (the default): no deadline to share
            return self._acquire_here(timeout)
        deadline = time.monotonic() + timeout
        if not self._acquire_here(timeout):
            return False
        across = self._across
        if across is None or across.acquire(deadline - time.monotonic()):
            return True
        self._release_here()
        return False

    def release(self) -> None:
        """End this turn: hand it to the oldest waiter, or leave the queue free."""
        if self._across is not None:
            self._across.release()  # unlocking a lock not held (just switched on) is a no-op
        self._release_here()

    def _acquire_here(self, timeout: float) -> bool:
        with self._guard:
            if not self._held:  # free, so nobody waits either (a release hands it on)
                self._held = True
                return True
            ticket = threading.Lock()
            ticket.acquire()
            self._waiters.append(ticket)
        if ticket.acquire(timeout=max(timeout, 0.0)):
            return True  # the previous holder handed its turn to us
        with self._guard:
            if ticket.acquire(blocking=False):
                return True  # handed over between the timeout and here: it is ours now
            self._waiters.remove(ticket)
            return False

    def _release_here(self) -> None:
        with self._guard:
            if self._waiters:
                self._waiters.popleft().release()  # stays held, by the next writer
            else:
                self._held = False

    @property
    def waiting(self) -> int:
        """How many writers wait for their turn now (for tests and diagnostics)."""
        with self._guard:
            return len(self._waiters)


IDLE_TAKER_SECONDS = 30.0
"""A taker thread with no request for this long ends (the next contention starts another)."""


class ProcessLock:
    """An exclusive `flock` on one file, awaited at most a timeout.

    A blocking `flock` cannot time out, so a waiting writer does not make the call itself: it
    asks this lock's taker thread (started on contention, one per file and process, ending when
    idle) and waits for its answer as long as it may. A request given up on is released by the taker as
    soon as the lock comes. The lock is only an ordering aid (see the module): a rare race
    between a give-up and the next request can cost order, never exclusion."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._handle: IO[bytes] | None = None
        self._unsupported = False
        self._requests: queue.SimpleQueue[_Request] = queue.SimpleQueue()
        self._taker: threading.Thread | None = None
        self._taker_guard = threading.Lock()

    def acquire(self, timeout: float) -> bool:
        handle = self._open()
        if handle is None:
            return True  # no file locks here: SQLite's lock alone orders the processes
        import fcntl

        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        request = _Request()
        with self._taker_guard:  # the taker, idle, stops only if no request is on its way
            if self._taker is None:
                self._taker = threading.Thread(
                    target=self._take, name=f"turnkeeper-writers:{self._path.name}", daemon=True
                )
                self._taker.start()
            self._requests.put(request)
        return request.wait(timeout)

    def release(self) -> None:
        if self._handle is not None:
            import fcntl

            fcntl.flock(self._handle, fcntl.LOCK_UN)

    def _open(self) -> IO[bytes] | None:
        if self._handle is None and not self._unsupported:
            try:
                import fcntl  # noqa: F401  (POSIX only)
            except ImportError:
                self._unsupported = True
                return None
            try:
                self._handle = self._path.open("a+b")
            except OSError:  # e.g. a read-only directory: SQLite's lock alone, as without fcntl
                self._unsupported = True
                return None
            weakref.finalize(self, self._handle.close)
        return self._handle

    def _take(self) -> None:
        import fcntl

        while True:
            try:
                request = self._requests.get(timeout=IDLE_TAKER_SECONDS)
            except queue.Empty:
                with self._taker_guard:
                    if self._requests.empty():
                        self._taker = None
                        return
                continue
            assert self._handle is not None
            fcntl.flock(self._handle, fcntl.LOCK_EX)
            if not request.grant():
                fcntl.flock(self._handle, fcntl.LOCK_UN)  # its writer gave up meanwhile


class _Request:
    """One writer's wait for the file lock: granted by the taker, or given up by the writer."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._granted = threading.Event()
        self._abandoned = False

    def grant(self) -> bool:
        """The taker holds the lock for this request: False if its writer no longer waits."""
        with self._guard:
            if self._abandoned:
                return False
            self._granted.set()
            return True

    def wait(self, timeout: float) -> bool:
        if self._granted.wait(max(timeout, 0.0)):
            return True
        with self._guard:
            if self._granted.is_set():
                return True
            self._abandoned = True
            return False


def lock_file_of(database: Path) -> Path:
    """Where the writers of `database` in several processes take turns: beside it, named apart
    from `turnkeeper.storage.locks`' `<database>.<name>.lock` files."""
    return database.with_name(f"{database.name}-writers.lock")


_QUEUES: weakref.WeakValueDictionary[tuple[int, str], WriteQueue] = weakref.WeakValueDictionary()
_QUEUES_GUARD = threading.Lock()


def queue_for(path: Path, *, across_processes: bool = False) -> WriteQueue:
    """The queue of the database file at `path`, shared by everyone in this process who asks
    for the same file (by resolved path); it lives as long as a store holds it. The key holds
    the process id: a forked child starts with queues of its own, never with a turn that a
    thread of its parent held at the fork. `across_processes`: turns also order this process's
    writers against other processes' (see the module)."""
    key = (os.getpid(), os.path.realpath(path))
    with _QUEUES_GUARD:
        found = _QUEUES.get(key)
        if found is None:
            found = _QUEUES[key] = WriteQueue()
    if across_processes:
        found.order_processes(lock_file_of(Path(key[1])))
    return found
