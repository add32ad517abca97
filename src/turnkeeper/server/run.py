"""Running the service (`turnkeeper serve`): bind, then serve under uvicorn, in one process or
in several workers.

The socket is bound before anything is announced, so a port already in use is one clear error
(and no "serving on" line first), and uvicorn is handed the bound socket.

With `workers` > 1 the process forks that many workers after binding: they all accept on the one
inherited socket (the kernel spreads the connections), and each builds its own app, store
connections and cache after the fork, so nothing opened is shared between processes. The parent
only supervises: it restarts a worker that dies, passes SIGINT/SIGTERM on to the workers and
returns when they have all stopped. What must run once per deployment (the expiry sweeper) runs
in worker 0 only; a restarted worker 0 takes it over.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import gc
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn

from turnkeeper.config import Settings
from turnkeeper.errors import InvalidConfig
from turnkeeper.logs import get_logger
from turnkeeper.server.app import check_bind, create_app
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

CRASH_LOOP_SECONDS = 5.0
"""A worker that dies sooner than this after starting is not restarted: something is wrong with
every worker (the database is unreachable, the app fails to build), and the whole service stops
with an error instead of forking in a loop."""

log = get_logger("turnkeeper.server")


def serve(settings: Settings, sock: socket.socket, *, workers: int = 1) -> None:
    """Serve the app on the bound socket until interrupted, in `workers` processes; only worker
    0 runs the expiry sweeper."""
    if workers > 1:
        # The workers' SQLite writers take turns at a lock file too, not in SQLite's sleeping
        # busy handler (`turnkeeper.storage.write_queue`).
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
        _run(factory(0), sock)
        return
    # What the supervisor holds now (modules, whatever `factory` built ahead) is the workers' too,
    # copy-on-write: frozen, a worker's collections never write to those objects' headers,
    # which would copy the pages they are on into each worker (bench/memory_stages.py).
    gc.freeze()
    code = Supervisor(factory, sock, workers).run()
    if code:
        sys.exit(code)


def _run(app: Any, sock: socket.socket) -> None:
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
        # longer than uvicorn's 5 s, so a client (or proxy) reusing a pooled connection does not
        # race the server closing it
        timeout_keep_alive=75,
    )
    uvicorn.Server(config).run(sockets=[sock])


class Supervisor:
    """Forks `workers` processes serving on `sock` and keeps them running (see the module)."""

    def __init__(self, factory: AppFactory, sock: socket.socket, workers: int) -> None:
        self.factory = factory
        self.sock = sock
        self.workers = workers
        self.children: dict[int, tuple[int, float]] = {}  # pid → (index, started)
        self.stopping = False

    def run(self) -> int:
        """Until every worker has stopped; returns the exit status for the service."""
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        code = 0
        try:
            for index in range(self.workers):
                self._start(index)
            while self.children:
                pid, status = os.wait()
                index, started = self.children.pop(pid, (-1, 0.0))
                if index < 0 or self.stopping:
                    continue
                log.warning("worker_stopped", worker=index, pid=pid, status=status)
                if time.monotonic() - started < CRASH_LOOP_SECONDS:
                    code = 1
                    self._stop(signal.SIGTERM, None)
                else:
                    self._start(index)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return code

    def _start(self, index: int) -> None:
        pid = os.fork()
        if pid == 0:  # the worker: serve, and never return into the supervisor's code
            code = 0
            try:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(sig, signal.SIG_DFL)
                _stop_with_parent()
                _run(self.factory(index), self.sock)
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        self.children[pid] = (index, time.monotonic())

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        """Stop every worker (each finishes its requests and its app's shutdown)."""
        self.stopping = True
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):  # exited meanwhile
                os.kill(pid, signal.SIGTERM)


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
