"""The watchdog behind the PostgreSQL socket timeout, on a plain socket pair: a wait past its
deadline is woken by the socket's shutdown and marked expired; a wait released in time is never
cut, and its socket serves on."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from turnkeeper.storage.sql.watchdog import Watchdog


@pytest.fixture
def watchdog() -> Iterator[Watchdog]:
    dog = Watchdog("test-watchdog")
    yield dog
    dog.close()


def test_a_wait_past_its_deadline_is_woken_and_marked_expired(watchdog: Watchdog) -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        watch = watchdog.watch(ours.fileno(), 0.05)
        received = ours.recv(10)  # the other end never writes: only the shutdown ends this
        watchdog.release(watch)
        assert (received, watch.expired) == (b"", True)


def test_a_wait_released_in_time_is_never_cut(watchdog: Watchdog) -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        for n in range(3):
            watch = watchdog.watch(ours.fileno(), 0.05)
            theirs.sendall(b"answer %d" % n)
            assert ours.recv(10) == b"answer %d" % n
            watchdog.release(watch)
            assert not watch.expired
        # the socket served every answer above; a wait that overstays is still cut
        late = watchdog.watch(ours.fileno(), 0.05)
        assert ours.recv(10) == b""
        watchdog.release(late)
        assert late.expired
