"""Logs and metrics of the HTTP service.

- The service logs through standard `logging`, like the rest of turnkeeper (see
  `turnkeeper.logs`). `configure_logging`, called where turnkeeper owns the process (`turnkeeper
  serve`, tests), renders those records and uvicorn's with structlog: human-readable on a
  terminal, JSON lines otherwise. An app embedded in someone else's server logs nothing unless
  its host configures logging.
- The request middleware binds a request id (the client's `X-Request-ID` when it sends a sane
  one, else a new one) into structlog's context variables, so every line logged while serving
  that request carries it, including the core's `conversation_context_loaded` event; the id is
  echoed back in `X-Request-ID`.
- Traces: each request is a SERVER span when tracing is configured (`turnkeeper.telemetry`),
  the parent of the spans the core makes while serving it.
- Metrics are the instruments of `turnkeeper.metrics`, recorded where the event happens (the
  core counts its own: context builds, writes, upstream calls, cache reads, sweeps) and kept in
  prometheus-client's registry by `turnkeeper.prometheus`; this module adds the request ones.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
import uuid
from collections.abc import Callable, MutableMapping
from typing import Any

import structlog
from starlette.types import Message, Receive, Scope, Send

from turnkeeper import metrics, telemetry
from turnkeeper.logs import ROOT, LogEvent, LogFormat, get_logger, send_to, snapshot
from turnkeeper.server.asgi import HTTPMiddleware

REQUEST_ID_HEADER = "x-request-id"
_SANE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")

_SERVED_LOGGERS = (ROOT, "uvicorn", "uvicorn.error")

log = get_logger("turnkeeper.server")


def spread_event(
    logger: Any, method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: a turnkeeper `LogEvent` record becomes its event name and fields."""
    record = event_dict.get("_record")
    message = getattr(record, "msg", None)
    if isinstance(message, LogEvent):
        event_dict.update(message.fields)
        event_dict["event"] = message.event
    return event_dict


def add_process_id(
    logger: Any, method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: the id of the process that logged (`pid`)."""
    record = event_dict.get("_record")
    event_dict["pid"] = getattr(record, "process", None) or os.getpid()
    return event_dict


def configure_logging(
    level: int = logging.INFO, log_format: LogFormat = "auto"
) -> Callable[[], None]:
    """turnkeeper's and uvicorn's records at `level` and above go to stderr: JSON lines, or
    human-readable console lines (`auto`: console on a terminal, JSON otherwise). Returns a
    function that restores logging as it was."""
    restore = snapshot(*_SERVED_LOGGERS)
    if log_format == "auto":
        log_format = "console" if sys.stderr.isatty() else "json"
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if log_format == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[
                spread_event,
                structlog.contextvars.merge_contextvars,
                structlog.stdlib.add_log_level,
                structlog.stdlib.add_logger_name,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                # which process wrote the line: `serve --workers N` runs several
                *([add_process_id] if log_format == "json" else []),
            ],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                *([structlog.processors.format_exc_info] if log_format == "json" else []),
                renderer,
            ],
        )
    )
    send_to(handler, level, *_SERVED_LOGGERS)
    return restore


# -- per request ----------------------------------------------------------------------------


class RequestObserver(HTTPMiddleware):
    """ASGI middleware: request id, one `http_request` log line, the request metrics and span.

    Written as plain ASGI (not `BaseHTTPMiddleware`) so streamed answers pass through untouched
    and are timed to their last byte.
    """

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        request_id = _request_id(scope)
        scope.setdefault("state", {})["request_id"] = request_id
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(request_id=request_id)
        started = time.perf_counter()
        status = 500
        traced = telemetry.http_request(scope["method"], scope["path"], scope["headers"])

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER.encode(), request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            route = _route_template(scope)
            metrics.HTTP_REQUESTS.labels(scope["method"], route, str(status)).inc()
            metrics.HTTP_LATENCY.labels(scope["method"], route).observe(elapsed)
            traced.end(scope["method"], route if route != "unmatched" else None, status)
            log.info(
                "http_request",
                method=scope["method"],
                path=scope["path"],
                route=route,
                status=status,
                duration_ms=round(elapsed * 1000, 2),
                key_id=scope["state"].get("key_id"),
            )
            structlog.contextvars.clear_contextvars()


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == REQUEST_ID_HEADER.encode():
            text = str(value.decode("latin-1"))
            if _SANE_REQUEST_ID.match(text):
                return text
    return uuid.uuid4().hex


def _route_template(scope: Scope) -> str:
    """The matched route's path template (bounded label values), or `unmatched`."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return str(path) if isinstance(path, str) else "unmatched"
