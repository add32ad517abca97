"""The supervisor of `turnkeeper serve --workers N` (`turnkeeper.server.run.Supervisor`) at the
moment it forks a worker: a stop signal that reaches the new worker before it has handlers of
its own must stop it, not run the supervisor's handler in it (which left the worker serving and
`serve` unable to stop: `tests/cli/test_serve.py` once waited 20 s for it under load).

The signal is sent at the one moment that matters, by the worker itself right after the fork
(`os.fork` wrapped for this test only); everything else is the real supervisor."""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Iterator

import pytest

from turnkeeper.config import load_settings
from turnkeeper.server.run import STOP_SIGNALS, Supervisor

GOT_PAST_THE_SIGNAL = 3
"""The exit status of a worker that went on to build its app after the signal."""


def _app_factory(index: int) -> object:
    raise SystemExit(GOT_PAST_THE_SIGNAL)


@pytest.fixture
def supervisor() -> Iterator[Supervisor]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        settings = load_settings(database_url="memory://")
        supervisor = Supervisor(_app_factory, settings, sock, workers=1)
        previous = {sig: signal.signal(sig, supervisor._stop) for sig in STOP_SIGNALS}
        try:
            yield supervisor  # with the handlers `Supervisor.run` installs
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


@pytest.mark.parametrize("stop", STOP_SIGNALS, ids=lambda sig: signal.Signals(sig).name)
def test_a_worker_signalled_as_it_is_forked_is_stopped_by_the_signal(
    supervisor: Supervisor, monkeypatch: pytest.MonkeyPatch, stop: signal.Signals
) -> None:
    fork = os.fork

    def fork_then_signal_the_child() -> int:
        pid = fork()
        if pid == 0:
            os.kill(os.getpid(), stop)
        return pid

    monkeypatch.setattr(os, "fork", fork_then_signal_the_child)
    supervisor._start(0)
    monkeypatch.undo()
    (pid,) = supervisor.children
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == -stop
    assert not supervisor.stopping  # the supervisor itself was not told to stop
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []).isdisjoint(STOP_SIGNALS)
