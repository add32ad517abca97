"""Fixtures for the cache tests: a private Redis server a test may stop and restart.

The shared Redis on 6379 stays untouched (other tests use it); `private_redis` runs its own
`redis-server` on a free port as a child process, with the same flags as the shared one.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import server_missing


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """A `redis-server` child process on `port`; `stop()` and `start()` it at will."""

    def __init__(self, binary: str, port: int, workdir: Path) -> None:
        self.binary = binary
        self.port = port
        self.workdir = workdir
        self.url = f"redis://127.0.0.1:{port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [self.binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
             "--appendonly", "no", "--dir", str(self.workdir), "--daemonize", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    binary = shutil.which("redis-server")
    if binary is None:
        server_missing("redis-server", "not installed")
        raise AssertionError("unreachable")
    server = RedisServer(binary, _free_port(), tmp_path)
    server.start()
    yield server
    server.stop()
