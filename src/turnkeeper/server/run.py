"""Running the service in this process (`turnkeeper serve`): bind, then serve under uvicorn.

The socket is bound before anything is announced, so a port already in use is one clear error
(and no "serving on" line first), and uvicorn is handed the bound socket.
"""

from __future__ import annotations

import errno
import socket

import uvicorn

from turnkeeper.config import Settings
from turnkeeper.errors import InvalidConfig
from turnkeeper.server.app import check_bind, create_app
from turnkeeper.server.memory import limit_arenas


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


def serve(settings: Settings, sock: socket.socket) -> None:
    """Serve the app on the bound socket until interrupted."""
    limit_arenas(settings.malloc_arenas)  # before uvicorn starts any thread
    config = uvicorn.Config(
        create_app(settings),
        access_log=False,  # the service logs each request itself, with its request id
        log_config=None,  # logging is configured by `configure_logging`
        # longer than uvicorn's 5 s, so a client (or proxy) reusing a pooled connection does not
        # race the server closing it
        timeout_keep_alive=75,
    )
    uvicorn.Server(config).run(sockets=[sock])
