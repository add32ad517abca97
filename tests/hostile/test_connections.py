"""Slow and idle connections against a real `turnkeeper serve` on loopback, over raw sockets:
each is closed once it passes its deadline (short ones here, set through the environment as a
user sets them), unauthenticated or not, instead of holding a file descriptor for as long as
the client likes. A client within its deadlines is served."""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from .served import Served, serve

TIMEOUTS = {
    "TURNKEEPER_HTTP_HEADER_TIMEOUT": "1s",
    "TURNKEEPER_HTTP_BODY_TIMEOUT": "2s",
    "TURNKEEPER_HTTP_KEEP_ALIVE_TIMEOUT": "1s",
}
PATIENCE = 30.0
"""How long a test waits for the server to close a connection: far past every deadline above,
so only a connection that is never closed fails (this is not a speed measurement)."""

DRIP = 0.1
"""Seconds between the bytes of a slow client: 300 bytes take 30 s, far past any deadline."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp: Path = tmp_path_factory.mktemp("connections")
    with serve(f"sqlite:///{tmp / 'slow.db'}", tmp / "serve.log", env=TIMEOUTS) as served:
        yield served


def _connect(served: Served) -> socket.socket:
    host, port = served.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=PATIENCE)


def _closed_by_server(sock: socket.socket) -> bytes | None:
    """What the server sent before it closed the connection, if it has closed it by now."""
    received = b""
    while select.select([sock], [], [], 0)[0]:
        try:
            piece = sock.recv(65536)
        except ConnectionResetError:
            return received
        if not piece:
            return received
        received += piece
    return None


def _drip(sock: socket.socket, data: bytes) -> tuple[int, bytes | None]:
    """Send `data` a byte at a time, `DRIP` seconds apart, until the server closes the
    connection: how many bytes went out, and what the server had sent when it closed (None:
    it never did)."""
    for sent in range(len(data)):
        answer = _closed_by_server(sock)
        if answer is not None:
            return sent, answer
        try:
            sock.sendall(data[sent : sent + 1])
        except (BrokenPipeError, ConnectionResetError):
            return sent, _closed_by_server(sock) or b""
        time.sleep(DRIP)
    return len(data), _closed_by_server(sock)


def _wait_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (a socket timeout fails the test)."""
    received = b""
    while True:
        try:
            piece = sock.recv(65536)
        except ConnectionResetError:
            return received
        if not piece:
            return received
        received += piece


def _head(path: str, *lines: str, method: str = "GET") -> bytes:
    fields = "".join(f"{line}\r\n" for line in ("Host: 127.0.0.1", *lines))
    return f"{method} {path} HTTP/1.1\r\n{fields}\r\n".encode()


def test_an_idle_new_connection_is_closed(server: Served) -> None:
    with _connect(server) as sock:
        assert _wait_closed(sock) == b""  # nothing said, nothing answered: just closed


def test_headers_sent_a_byte_at_a_time_are_cut_off(server: Served) -> None:
    request = _head("/healthz", "X-Padding: " + "x" * 300)
    with _connect(server) as sock:
        sent, answer = _drip(sock, request)
    assert answer is not None, "the connection was never closed"
    assert sent < len(request) and b"HTTP/1.1 200" not in answer


@pytest.mark.parametrize("authenticated", [False, True])
def test_a_body_sent_a_byte_at_a_time_is_cut_off(server: Served, authenticated: bool) -> None:
    """Without a key the server answers 401 at once without reading the body; with one it
    waits for the body. Either way the client must finish sending it within the deadline."""
    body = b'{"key": "' + b"k" * 200 + b'"}'
    key = [f"Authorization: Bearer {server.key}"] if authenticated else []
    head = _head(
        "/v1/sessions",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        *key,
        method="POST",
    )
    with _connect(server) as sock:
        sock.sendall(head)
        sent, answer = _drip(sock, body)
    assert answer is not None, "the connection was never closed"
    assert sent < len(body)
    with server.client() as http:
        assert http.get("/v1/sessions", params={"key": "k" * 200}).json()["items"] == []


def test_an_idle_kept_alive_connection_is_closed_after_its_response(server: Served) -> None:
    with _connect(server) as sock:
        sock.sendall(_head("/healthz"))
        answer = _wait_closed(sock)
    assert answer.startswith(b"HTTP/1.1 200")


def test_a_client_within_the_deadlines_is_served(server: Served) -> None:
    """A request split into pieces, each well within the deadlines, and a second request on
    the same connection after a short pause."""
    body = b'{"key": "steady"}'
    request = _head(
        "/v1/sessions",
        f"Authorization: Bearer {server.key}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        method="POST",
    )
    with _connect(server) as sock:
        for piece in _pieces(request + body, 4):
            sock.sendall(piece)
            time.sleep(0.1)
        first = _response(sock)
        time.sleep(0.2)
        sock.sendall(_head("/healthz", "Connection: close"))
        second = _wait_closed(sock)
    assert first.startswith(b"HTTP/1.1 201") and b'"steady"' in first
    assert second.startswith(b"HTTP/1.1 200")


def _pieces(data: bytes, count: int) -> Iterable[bytes]:
    size = -(-len(data) // count)
    return (data[start : start + size] for start in range(0, len(data), size))


def _response(sock: socket.socket) -> bytes:
    """One response with a Content-Length body."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body
