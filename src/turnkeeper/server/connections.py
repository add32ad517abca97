"""How long a connection may take to send its request: uvicorn's HTTP/1.1 protocol with
read deadlines.

uvicorn closes a connection that stays idle after a response (`timeout_keep_alive`), but it
has no deadline for reading a request: a client that connects and sends nothing, or sends its
headers (or body) a byte at a time, holds its connection, and a file descriptor, for as long as
it likes, before any authentication can run. `TimedH11Protocol` is uvicorn's own h11 protocol
(uvicorn takes a protocol class for its `http` option) with two deadlines added:

- the request line and headers must have arrived `header_timeout` after the connection opened,
  or after the first byte of the next request on a kept-alive connection;
- the body must have arrived `body_timeout` after the headers did, whether or not the app
  reads it (one that was answered without reading its body still has to finish sending it).

Past either, the connection is closed. Between requests uvicorn's keep-alive timeout applies as
before. The client's progress is read from the h11 connection's state of the client's side
(`IDLE`: still before the end of the headers; `SEND_BODY`: in the body; `DONE`: all sent), so
the deadlines follow the parser rather than guessing from bytes.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class TimedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request arrives too slowly."""

    header_timeout: ClassVar[float] = 10.0
    body_timeout: ClassVar[float] = 60.0

    deadline: asyncio.TimerHandle | None = None
    waiting_for: object = None
    """What the client is late with while `deadline` runs: `h11.IDLE` (the request line and
    headers) or `h11.SEND_BODY` (the body); None: it owes nothing (the server does, or the
    connection is idle between requests, which is the keep-alive timeout's)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._follow()  # even before the first byte: an idle new connection counts

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may start the next cycle and parse a pipelined request
        self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        self._expect(None)
        super().connection_lost(exc)

    def _follow(self) -> None:
        """Move the deadline along with what the client has sent so far. A request whose first
        byte has not come on a kept-alive connection is the keep-alive timer's (uvicorn stops
        it at the first byte); from that byte on, the header deadline runs."""
        state = self.conn.their_state
        owed: object
        if self.transport.is_closing():
            owed = None
        elif state is h11.SEND_BODY:
            owed = h11.SEND_BODY
        elif state is h11.IDLE and self.timeout_keep_alive_task is None:
            owed = h11.IDLE
        else:
            owed = None
        if owed is not self.waiting_for:
            self._expect(owed)

    def _expect(self, owed: object) -> None:
        """Start the deadline for what the client owes (None: stop it)."""
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None
        self.waiting_for = owed
        if owed is not None:
            timeout = self.header_timeout if owed is h11.IDLE else self.body_timeout
            self.deadline = self.loop.call_later(timeout, self._too_slow)

    def _too_slow(self) -> None:
        self.deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def timed_protocol(header_timeout: timedelta, body_timeout: timedelta) -> type[TimedH11Protocol]:
    """The protocol class for uvicorn's `http` option, with these deadlines."""
    return type(
        "TimedH11Protocol",
        (TimedH11Protocol,),
        {
            "header_timeout": header_timeout.total_seconds(),
            "body_timeout": body_timeout.total_seconds(),
        },
    )
