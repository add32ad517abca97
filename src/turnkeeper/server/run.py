"""Running the service (`turnkeeper serve`): bind, then serve under uvicorn, in one process or
in several workers.

The socket is bound before anything is announced, so a port already in use is one clear error
(and no "serving on" line first), and uvicorn is handed the bound socket.

With `workers` > 1 the process forks that many workers after binding: they all accept on the one
inherited socket (the kernel spreads the connections), and each builds its own app, store
connections and cache after the fork, so nothing opened is shared between processes. The parent
only supervises: it replaces a worker that dies (at once if it had served a while, else after a
delay that doubles while it keeps dying young), passes SIGINT/SIGTERM on to the workers and
returns when they have all stopped. It gives up, and the service stops with an error, only when
workers cannot start at all: one died before it ever served, `FAILED_STARTS` times in a row,
while no other worker was serving. What must run once per deployment (the expiry sweeper) runs
in worker 0 only; a restarted worker 0 takes it over.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import gc
import math
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, NoReturn

import uvicorn

from turnkeeper.config import Settings
from turnkeeper.errors import InvalidConfig
from turnkeeper.logs import get_logger
from turnkeeper.server.app import check_bind, create_app
from turnkeeper.server.connections import timed_protocol
from turnkeeper.server.memory import limit_arenas
from turnkeeper.tokens import counter_for


def bind(settings: Settings) -> socket.socket:
    """A listening socket on `settings.host`:`settings.port`, or `InvalidConfig` saying why
    not (in use, not an address of this machine, not allowed)."""
    check_bind(settings)
    host = settings.host.strip("[]")
    try:
        infos = socket.getaddrinfo(host, settings.port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise InvalidConfig("host", f"cannot resolve {host!r}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            problem = f"{settings.port} on {host} is already in use; choose another with --port"
            raise InvalidConfig("port", problem) from None
        raise InvalidConfig(
            "host", f"cannot listen on {host}:{settings.port}: {exc.strerror}"
        ) from None
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    """The service's base URL (with the port actually bound, e.g. when asked for port 0)."""
    host, port = sock.getsockname()[:2]
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}"


AppFactory = Callable[[int], Any]
"""Builds the ASGI app a worker serves, given the worker's index (0 … workers - 1)."""

FIRST_RESTART_DELAY = 0.5
"""Seconds before a worker that died young is started again; doubled for each such death of
that worker in a row, up to `LONGEST_RESTART_DELAY`."""

LONGEST_RESTART_DELAY = 30.0

HEALTHY_SECONDS = 10.0
"""A worker that served this long before it died is replaced at once, and its delays start
over: one crash (or one kill) is not a crash loop."""

FAILED_STARTS = 3
"""A worker that died before it was ready this many times in a row, while no other worker is
serving, means workers cannot start at all (the database is unreachable, the app fails to
build): the service stops with an error instead of forking forever."""

log = get_logger("turnkeeper.server")


def serve(settings: Settings, sock: socket.socket, *, workers: int = 1) -> None:
    """Serve the app on the bound socket until interrupted, in `workers` processes; only worker
    0 runs the expiry sweeper."""
    if workers > 1:
        # The workers' SQLite writers take turns at a lock file too, not in SQLite's sleeping
        # busy handler (`turnkeeper.storage.sql.write_queue`).
        settings = settings.model_copy(update={"sqlite_writer_lock_file": True})
        # The tokenizer's rank tables are the bulk of a worker's memory: loaded once here, before
        # the fork, the workers share their pages instead of each building its own copy.
        counter_for(settings.token_encoding).count_text("loaded before the workers fork")
        # So are the apps (their routes, models and validators): built here, the two kinds a
        # worker serves, each worker (and a restarted one) serves its copy of one of them. An
        # app opens nothing until its lifespan starts, in the worker.
        sweeping, other = create_app(settings, sweep=True), create_app(settings, sweep=False)
        serve_app(lambda index: sweeping if index == 0 else other, settings, sock, workers=workers)
        return
    serve_app(lambda index: create_app(settings, sweep=index == 0), settings, sock, workers=workers)


def serve_app(
    factory: AppFactory, settings: Settings, sock: socket.socket, *, workers: int = 1
) -> None:
    """Serve `factory(index)` on `sock` under uvicorn with the service's settings, in this
    process (`workers` = 1) or in `workers` forked processes."""
    limit_arenas(settings.malloc_arenas)  # before uvicorn starts any thread, in every worker
    if workers <= 1:
        _run(factory(0), settings, sock)
        return
    # What the supervisor holds now (modules, whatever `factory` built ahead) is the workers' too,
    # copy-on-write: frozen, a worker's collections never write to those objects' headers,
    # which would copy the pages they are on into each worker (bench/memory_stages.py).
    gc.freeze()
    code = Supervisor(factory, settings, sock, workers).run()
    if code:
        sys.exit(code)


def _run(
    app: Any, settings: Settings, sock: socket.socket, on_ready: Callable[[], None] | None = None
) -> None:
    # What start-up built (modules, the app and its models) lives as long as the process: out of
    # the collector's reach, each full collection walks only what requests made. Under 50
    # clients that cut the full collections' pauses, which stop every request thread, from
    # ~230 ms to ~85 ms each (bench/results/http-sqlite-queue.md). Here, not in the app's
    # lifespan: a process that builds many apps (tests) would keep each one's garbage forever.
    gc.freeze()
    config = uvicorn.Config(
        app,
        access_log=False,  # the service logs each request itself, with its request id
        log_config=None,  # logging is configured by `configure_logging`
        # uvicorn's h11 protocol with deadlines for reading a request (`connections`)
        http=timed_protocol(settings.http_header_timeout, settings.http_body_timeout),
        timeout_keep_alive=math.ceil(settings.http_keep_alive_timeout.total_seconds()),
    )
    _Server(config, on_ready).run(sockets=[sock])


class _Server(uvicorn.Server):
    """uvicorn's server, calling `on_ready` once it serves: the app's lifespan has started
    (the store is open) and the socket is accepting."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None] | None) -> None:
        super().__init__(config)
        self.on_ready = on_ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.on_ready is not None:
            self.on_ready()


@dataclass
class Worker:
    """A forked worker as the supervisor sees it. `ready_pipe` is the read end of a pipe the worker
    writes one byte to once it serves, so whether it ever did can be asked at any time, even
    after it died, without a round trip to it."""

    index: int
    pid: int
    started: float
    ready_pipe: int
    served: bool = False

    def has_served(self) -> bool:
        """True once the worker has said it serves (read without waiting)."""
        if not self.served:
            with contextlib.suppress(BlockingIOError):
                self.served = os.read(self.ready_pipe, 1) == READY
        return self.served


READY = b"r"


def _say_ready(pipe: int) -> None:
    os.write(pipe, READY)
    os.close(pipe)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop the service: the supervisor passes them on to its workers."""


class Supervisor:
    """Forks `workers` processes serving on `sock` and keeps them running (see the module):
    a worker that dies is replaced, after a delay that grows while it keeps dying young; the
    service stops only when workers cannot start at all (`FAILED_STARTS`)."""

    def __init__(
        self, factory: AppFactory, settings: Settings, sock: socket.socket, workers: int
    ) -> None:
        self.factory = factory
        self.settings = settings
        self.sock = sock
        self.workers = workers
        self.children: dict[int, Worker] = {}  # by pid
        self.due: dict[int, float] = {}  # worker index → when it is started again
        self.young_deaths = [0] * workers  # per index: deaths in a row soon after starting
        self.failed_starts = [0] * workers  # per index: deaths in a row before serving
        self.stopping = False
        self.code = 0

    def run(self) -> int:
        """Until every worker has stopped; returns the exit status for the service."""
        previous = {sig: signal.signal(sig, self._stop) for sig in STOP_SIGNALS}
        try:
            for index in range(self.workers):
                self._start(index)
            while self.children or (self.due and not self.stopping):
                self._start_due()
                pid, status = self._wait()
                if pid:
                    self._stopped(pid, status)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for worker in self.children.values():
                os.close(worker.ready_pipe)
        return self.code

    def _wait(self) -> tuple[int, int]:
        """The next worker to exit (pid, status), or (0, 0) when a restart falls due first."""
        if not self.due or self.stopping:
            return os.wait()
        until = min(self.due.values())
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:  # none is running: only restarts are due
                pid, status = 0, 0
            left = until - time.monotonic()
            if pid or left <= 0:
                return pid, status
            time.sleep(min(left, 0.05))

    def _stopped(self, pid: int, status: int) -> None:
        """A worker exited: log it, and plan its replacement (or give up, see the class)."""
        worker = self.children.pop(pid, None)
        if worker is None:
            return
        served = worker.has_served()
        os.close(worker.ready_pipe)
        if self.stopping:
            return
        index, lived = worker.index, time.monotonic() - worker.started
        young = not served or lived < HEALTHY_SECONDS
        self.young_deaths[index] = self.young_deaths[index] + 1 if young else 0
        self.failed_starts[index] = 0 if served else self.failed_starts[index] + 1
        give_up = self.failed_starts[index] >= FAILED_STARTS and not self._serving()
        delay = None if give_up else _restart_delay(self.young_deaths[index])
        code = os.waitstatus_to_exitcode(status)
        log.warning(
            "worker_stopped",
            worker=index,
            worker_pid=pid,  # `pid` names the process that writes the line: the supervisor
            exit_code=code if code >= 0 else None,
            signal=signal.Signals(-code).name if code < 0 else None,
            served=served,
            restart_in_seconds=delay,
        )
        if delay is None:
            log.error("workers_cannot_start", worker=index, failed_starts=FAILED_STARTS)
            self.code = 1
            self._stop(signal.SIGTERM, None)
        else:
            self.due[index] = time.monotonic() + delay

    def _serving(self) -> bool:
        return any(worker.has_served() for worker in self.children.values())

    def _start_due(self) -> None:
        now = time.monotonic()
        for index, when in list(self.due.items()):
            if when <= now and not self.stopping:
                del self.due[index]
                self._start(index)

    def _start(self, index: int) -> None:
        """Fork worker `index`. SIGINT and SIGTERM are blocked across the fork: a worker
        signalled before it has its own handlers would otherwise run the supervisor's (`_stop`,
        inherited) and serve on, deaf to the stop; blocked, the signal waits, and kills it as
        soon as its handlers are the default ones again."""
        ready, tell_ready = os.pipe()
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            pid = os.fork()
            if pid == 0:  # the worker: serve, and never return into the supervisor's code
                self._work(index, ready, tell_ready)
            os.close(tell_ready)
            os.set_blocking(ready, False)
            self.children[pid] = Worker(index, pid, time.monotonic(), ready)
        finally:  # in the supervisor: a signal that came meanwhile is handled now
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        if self.stopping:  # a signal came while it was being forked
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def _work(self, index: int, ready: int, tell_ready: int) -> NoReturn:
        """A forked worker's life: default handlers for the stop signals (blocked until
        then), serve, exit."""
        code = 0
        try:
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
            _stop_with_parent()
            os.close(ready)
            for other in self.children.values():
                os.close(other.ready_pipe)
            on_ready = functools.partial(_say_ready, tell_ready)
            _run(self.factory(index), self.settings, self.sock, on_ready)
        except SystemExit as exc:  # uvicorn's, when the app failed to start: it logged why
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        """Stop every worker (each finishes its requests and its app's shutdown)."""
        self.stopping = True
        self.due.clear()
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):  # exited meanwhile
                os.kill(pid, signal.SIGTERM)


def _restart_delay(young_deaths: int) -> float:
    """Seconds before a worker is started again, after `young_deaths` deaths in a row soon
    after starting (0: it served long enough, so at once)."""
    if young_deaths == 0:
        return 0.0
    return min(FIRST_RESTART_DELAY * 2.0 ** (young_deaths - 1), LONGEST_RESTART_DELAY)


PR_SET_PDEATHSIG = 1
"""Linux `prctl` option: the signal a process gets when its parent dies."""


def _stop_with_parent() -> None:
    """Have the kernel send this worker SIGTERM if the supervisor dies (even by SIGKILL), so no
    worker goes on serving unsupervised; a no-op off Linux."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        return
