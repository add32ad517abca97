"""Logging of the library: standard `logging` under the `turnkeeper` logger, silent by default.

A library must not write to its host's stdout or stderr: the host decides where logs go. Every
module logs through `logging.getLogger("turnkeeper.<part>")`, the `turnkeeper` logger carries a
`NullHandler` (so Python's last-resort handler never prints our warnings), and nothing here
installs a handler. To see the events, configure logging as usual, e.g.
`logging.basicConfig(level=logging.INFO)`.

Events keep structlog's shape, an event name plus key/value fields: the record's message is a
`LogEvent`, which plain `logging` prints as `event key=value …`, and which the processes
turnkeeper owns (`turnkeeper serve`, the CLI) spread into JSON or console columns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal

ROOT = "turnkeeper"

LogFormat = Literal["auto", "console", "json"]
"""How a process turnkeeper owns writes its log lines: JSON, readable console lines, or `auto`
(console lines on a terminal, JSON otherwise)."""

LogLevel = Literal["debug", "info", "warning", "error"]
"""The least severe log lines such a process writes (a `logging` level's name, lower case)."""

logging.getLogger(ROOT).addHandler(logging.NullHandler())


class LogEvent:
    """A record's message: an event name and its fields, rendered lazily."""

    __slots__ = ("event", "fields")

    def __init__(self, event: str, fields: Mapping[str, Any]) -> None:
        self.event = event
        self.fields = dict(fields)

    def __str__(self) -> str:
        pairs = (f"{key}={value!r}" for key, value in self.fields.items())
        return " ".join([self.event, *pairs])

    def __repr__(self) -> str:
        return f"LogEvent({self.event!r}, {self.fields!r})"


class EventLogger:
    """structlog-style calls (`log.info("event", key=value)`) onto a standard library logger.

    `exc_info` is passed on to `logging`; every other keyword is a field of the event.
    """

    def __init__(self, name: str) -> None:
        self.stdlib = logging.getLogger(name)

    def debug(self, event: str, /, **fields: Any) -> None:
        self._log(logging.DEBUG, event, fields)

    def info(self, event: str, /, **fields: Any) -> None:
        self._log(logging.INFO, event, fields)

    def warning(self, event: str, /, **fields: Any) -> None:
        self._log(logging.WARNING, event, fields)

    def error(self, event: str, /, **fields: Any) -> None:
        self._log(logging.ERROR, event, fields)

    def _log(self, level: int, event: str, fields: dict[str, Any]) -> None:
        if self.stdlib.isEnabledFor(level):
            exc_info = fields.pop("exc_info", None)
            self.stdlib.log(level, LogEvent(event, fields), exc_info=exc_info, stacklevel=3)


def get_logger(name: str) -> EventLogger:
    """The event logger of one part of turnkeeper (`name` under `turnkeeper.`)."""
    return EventLogger(name)


def event_dict(record: logging.LogRecord) -> dict[str, Any]:
    """A record as structlog would hold it: `event`, `log_level` and the fields."""
    message = record.msg
    if isinstance(message, LogEvent):
        return {"event": message.event, "log_level": record.levelname.lower(), **message.fields}
    return {"event": record.getMessage(), "log_level": record.levelname.lower()}


def snapshot(*names: str) -> Callable[[], None]:
    """Remember the handlers, level, filters and propagation of the named loggers; the returned
    function puts them back. For the processes that configure logging and must undo it (the
    CLI may run in-process, tests configure and restore)."""
    saved = [
        (logger, list(logger.handlers), logger.level, list(logger.filters), logger.propagate)
        for logger in map(logging.getLogger, names)
    ]

    def restore() -> None:
        for logger, handlers, level, filters, propagate in saved:
            logger.handlers = handlers
            logger.setLevel(level)
            logger.filters = filters
            logger.propagate = propagate

    return restore


def send_to(handler: logging.Handler, level: int, *names: str) -> None:
    """Where turnkeeper owns the process: the named loggers' records at `level` and above go to
    `handler` only (not on to the root logger)."""
    handler.setLevel(level)
    for logger in map(logging.getLogger, names):
        logger.handlers = [handler]
        logger.setLevel(level)
        logger.propagate = False


class _Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.events: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.events.append(event_dict(record))


@contextmanager
def capture_events() -> Iterator[list[dict[str, Any]]]:
    """Collect every turnkeeper event logged inside the block, as dicts (`event`, `log_level`,
    fields), like `structlog.testing.capture_logs`; logging is as before afterwards."""
    restore = snapshot(ROOT)
    collector = _Collector()
    root = logging.getLogger(ROOT)
    root.addHandler(collector)
    root.setLevel(logging.DEBUG)
    root.propagate = False
    try:
        yield collector.events
    finally:
        restore()
