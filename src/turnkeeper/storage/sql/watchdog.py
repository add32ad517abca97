"""A watchdog over statements waiting for their answer: a database server that stops answering
(frozen, stopped, its machine cut off without a reset) must not hold a request for as long as
that lasts.

psycopg waits for the server's answer without a limit, and TCP cannot tell a frozen server from
a slow one: the server's kernel still acknowledges every packet. So a statement registers its
connection's socket here with a deadline while it waits (`watch`, then `release`), and one
thread, awake only while statements are registered, looks at them a few times a second and shuts
down the socket of any past its deadline. The waiting statement then fails at once, as on a
connection the server closed (psycopg's blocking and asyncio waits alike wake up on it), its
connection is broken and the pool drops it; `Watch.expired` tells the statement that it was cut
off rather than failed.

A deadline is checked and a socket shut down under the lock that `release` takes, so a
statement that has released its watch is never cut off afterwards.
"""

from __future__ import annotations

import socket
import threading
import time

TICK = 0.1
"""How often the thread looks at the registered statements: a cut comes up to this late."""


class Watch:
    """One statement's wait: its socket, its deadline, and whether it was cut off."""

    __slots__ = ("deadline", "expired", "fd")

    def __init__(self, fd: int, deadline: float) -> None:
        self.fd = fd
        self.deadline = deadline
        self.expired = False


class Watchdog:
    """Cuts off the connections of statements that wait past their deadline (see the module)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._watches: set[Watch] = set()
        self._changed = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        self._closed = False

    def watch(self, fd: int, seconds: float) -> Watch:
        """Register a statement about to wait on socket `fd` for at most `seconds`."""
        watch = Watch(fd, time.monotonic() + seconds)
        with self._changed:
            self._watches.add(watch)
            if self._closed:  # its store is closed: nothing is watched any more
                return watch
            if self._thread is None or not self._thread.is_alive():  # first use, or a fork
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            elif len(self._watches) == 1:
                self._changed.notify()
        return watch

    def release(self, watch: Watch) -> None:
        """The statement has its answer (or its error): it is no longer watched."""
        with self._changed:
            self._watches.discard(watch)

    def close(self) -> None:
        """Stop the thread (statements still registered are no longer watched)."""
        with self._changed:
            self._closed = True
            self._watches.clear()
            self._changed.notify()

    def _run(self) -> None:
        with self._changed:
            while not self._closed:
                if not self._watches:
                    self._changed.wait()
                    continue
                now = time.monotonic()
                for watch in [w for w in self._watches if w.deadline <= now]:
                    self._watches.discard(watch)
                    watch.expired = True
                    _shut_down(watch.fd)
                self._changed.wait(TICK)


def _shut_down(fd: int) -> None:
    """End the connection on socket `fd` in both directions; whoever waits on it wakes up. The
    descriptor itself stays open for its owner to close (`fromfd` works on a duplicate)."""
    try:
        with socket.fromfd(fd, socket.AF_INET, socket.SOCK_STREAM) as duplicate:
            duplicate.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed or reset: nothing is waiting on it any more
        pass
