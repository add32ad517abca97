"""Real uvicorn servers on free loopback ports, in threads, for the HTTP tests.

Starting and stopping uvicorn for every test (a thread, a socket, and on the way out the
server's own 0.1 s tick before it notices it should stop) was a large part of the HTTP tests'
time. So a server, once started, is kept for the rest of the test process and lent to one app
at a time: `LiveServer(app)` mounts `app` on an idle server (a new one when none is idle), runs
the app's lifespan as uvicorn does (startup before the first request; shutdown once the
requests it was serving have ended), and hands the server back when the block ends. While it
is mounted the app has the server to itself: its own port, its own connections, its own
lifespan state, as before.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Coroutine
from types import TracebackType
from typing import Any

import uvicorn
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.lifespan.on import LifespanOn

PATIENCE = 10.0
"""Seconds to wait for a server to start, and for an app's requests to end once its block
has: the join timeout the per-test servers had."""


class _Host:
    """One uvicorn server on 127.0.0.1:<free port> in a thread of its own, serving whichever
    app is mounted (a 503 while none is)."""

    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port: int = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.app: ASGIApp | None = None
        self.app_state: dict[str, Any] = {}
        self.in_flight = 0
        """Requests of the mounted app still being answered (counted on the server's loop)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        config = uvicorn.Config(
            self._serve, log_level="warning", access_log=False, lifespan="off", interface="asgi3"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=asyncio.run, args=(self._run(),), daemon=True)
        self._thread.start()
        deadline = time.monotonic() + PATIENCE
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.005)

    async def _run(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self._server.serve(sockets=[self._socket])

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self.app
        if app is None:
            if scope["type"] == "http":
                await PlainTextResponse("no app is mounted", 503)(scope, receive, send)
            return
        self.in_flight += 1
        try:
            scope["state"] = self.app_state.copy()  # as uvicorn: the app's lifespan state
            await app(scope, receive, send)
        finally:
            self.in_flight -= 1

    def _call(self, coroutine: Coroutine[Any, Any, None]) -> None:
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=60)

    def mount(self, app: ASGIApp) -> LifespanOn:
        """Run `app`'s lifespan startup on the server's loop, then serve it; its lifespan."""
        lifespan = LifespanOn(
            uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
        )
        self._call(lifespan.startup())
        if lifespan.should_exit:
            self._call(lifespan.shutdown())
            raise RuntimeError("the test server did not start")
        self.app_state, self.app = lifespan.state, app
        return lifespan

    def unmount(self, lifespan: LifespanOn) -> bool:
        """Wait for the mounted app's requests to end, stop serving it and run its lifespan
        shutdown. False when requests were still running after `PATIENCE`: the server must
        not be lent again (they would go on beside the next app)."""
        deadline = time.monotonic() + PATIENCE
        while self.in_flight and time.monotonic() < deadline:
            time.sleep(0.005)
        self.app, self.app_state = None, {}
        self._call(lifespan.shutdown())
        return not self.in_flight

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=PATIENCE)
        self._socket.close()


_idle: list[_Host] = []
_idle_guard = threading.Lock()


class LiveServer:
    """Serves `app` on 127.0.0.1:<a port of its own> until closed; `url` is its base URL."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._host: _Host | None = None
        self._lifespan: LifespanOn | None = None
        self.port = 0
        self.url = ""

    def __enter__(self) -> LiveServer:
        with _idle_guard:
            host = _idle.pop() if _idle else None
        host = host or _Host()
        try:
            self._lifespan = host.mount(self._app)
        except BaseException:
            with _idle_guard:
                _idle.append(host)
            raise
        self._host, self.port, self.url = host, host.port, host.url
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        host, lifespan = self._host, self._lifespan
        assert host is not None and lifespan is not None
        self._host = self._lifespan = None
        if host.unmount(lifespan):
            with _idle_guard:
                _idle.append(host)
        else:
            host.stop()
