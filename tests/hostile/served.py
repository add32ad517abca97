"""`turnkeeper serve` as a user runs it: a real subprocess on a free loopback port, with its
resident memory readable from /proc, and the raw HTTP a hostile client would send."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

TURNKEEPER = [sys.executable, "-m", "turnkeeper"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_cli(
    *args: str,
    env: dict[str, str] | None = None,
    stdin: bytes = b"",
    cwd: Path | None = None,
    stdout: IO[bytes] | int = subprocess.PIPE,
) -> subprocess.CompletedProcess[bytes]:
    """One `turnkeeper` command in a subprocess (bytes in, bytes out), never reading the
    developer's own config file."""
    environment = {**os.environ, "TURNKEEPER_CONFIG": os.devnull, **(env or {})}
    return subprocess.run(
        [*TURNKEEPER, *args], input=stdin, stdout=stdout, stderr=subprocess.PIPE,
        env=environment, cwd=cwd, timeout=120, check=False,
    )  # fmt: skip


@dataclass
class Served:
    """A running `turnkeeper serve`: its URL, its process and an admin API key."""

    url: str
    process: subprocess.Popen[bytes]
    key: str

    def rss_bytes(self) -> int:
        """Resident memory of the server process, from /proc/PID/status (VmRSS)."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        line = next(row for row in status.splitlines() if row.startswith("VmRSS:"))
        return int(line.split()[1]) * 1024

    def client(self, **kwargs: object) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.key}"}, **kwargs
        )


@contextmanager
def serve(
    db_url: str, log: Path, *extra: str, env: dict[str, str] | None = None
) -> Iterator[Served]:
    """Run `turnkeeper serve --db db_url` until the block ends; its logs go to `log`."""
    environment = {**os.environ, "TURNKEEPER_CONFIG": os.devnull, **(env or {})}
    created = run_cli("keys", "create", "--project", "ops", "--admin", "--json", "--db", db_url,
                      env=environment)  # fmt: skip
    assert created.returncode == 0, created.stderr.decode()
    key = _key_of(created.stdout.decode())
    port = free_port()
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*TURNKEEPER, "serve", "--port", str(port), "--db", db_url, *extra],
            stdout=sink, stderr=subprocess.STDOUT, env=environment,
        )  # fmt: skip
        served = Served(f"http://127.0.0.1:{port}", process, key)
        try:
            _wait_until_up(served, log)
            yield served
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _key_of(output: str) -> str:
    return str(json.loads(output)["token"])


def _wait_until_up(served: Served, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if served.process.poll() is not None:
            raise RuntimeError(f"turnkeeper serve exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(served.url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"turnkeeper serve did not start: {log.read_text()[-2000:]}")


@dataclass(frozen=True)
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes


def send_chunked(
    url: str, path: str, chunks: Iterable[bytes], headers: dict[str, str]
) -> RawResponse:
    """POST `chunks` as a chunked body on a raw socket, sending until the server answers or
    stops reading, then read its answer. (An HTTP client library would insist on finishing
    the upload before it looked at a response.)"""
    host, port = url.removeprefix("http://").split(":")
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n"
            f"{head}\r\n".encode()
        )
        try:
            for chunk in chunks:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server answered and closed: read what it said
        return _read_response(sock)


def _read_response(sock: socket.socket) -> RawResponse:
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        if not piece:
            break
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in lines[1:])
    }
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        piece = sock.recv(65536)
        if not piece:
            break
        body += piece
    return RawResponse(int(lines[0].split()[1]), headers, body[:length])
