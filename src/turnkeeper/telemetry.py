"""Traces in OpenTelemetry's terms: the one module that knows OpenTelemetry.

What turnkeeper traces, each at one place (`docs/observability.md` lists every name):

- an HTTP request of the service: a SERVER span (`RequestObserver` opens it with
  `http_request`; the client's `traceparent` is honoured);
- a context build: a `search_memory` span (the GenAI conventions' memory operation) with what
  the build kept, dropped and summarized, and the events `turnkeeper.context.dropped` and
  `turnkeeper.context.compacted` (`traced_build`, on `Turnkeeper.context`);
- an upstream model call: a `chat {model}` CLIENT span with the GenAI conventions' request,
  response and usage attributes, cached input tokens included (`chat_call`, in `LLMClient`);
- a store operation: a CLIENT span per call of the backend, below the caches, with the
  database conventions' `db.system.name` and `db.operation.name` (`traced_store`, where
  `assemble.open_store` opens the backend).

The design rule: off costs nothing. Nothing here imports OpenTelemetry until something asks for
a span while it is already imported, and a span is made only when a real `TracerProvider` is
installed: the application's own (a library user who configured OpenTelemetry gets turnkeeper's
spans on theirs), or the one `configure()` installs from the standard `OTEL_EXPORTER_OTLP_*`
variables (`turnkeeper serve` and the CLI call it; a library user may). Without either, every
hook is a check of `sys.modules` and a plain call. Nothing is printed: a problem is logged
through `turnkeeper.logs`, like every other event of the library.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import urlsplit

from turnkeeper.logs import get_logger

if TYPE_CHECKING:  # without importing OpenTelemetry at run time
    from opentelemetry.trace import Span, Tracer

    from turnkeeper.storage.base import Store
    from turnkeeper.types import ContextReport, ContextWindow

__all__ = [
    "ENDPOINT_VARIABLES",
    "chat_call",
    "configure",
    "flush",
    "http_request",
    "span",
    "traced_build",
    "traced_store",
    "tracer",
]

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
"""Either one tells `configure()` where to send traces (the standard OTLP variables)."""

MISSING_OTEL = "tracing to OpenTelemetry needs the otel extra: pip install 'turnkeeper[otel]'"

SERVICE_NAME = "turnkeeper"
"""`service.name` unless `OTEL_SERVICE_NAME` (or `OTEL_RESOURCE_ATTRIBUTES`) names another."""

PROVIDER_NAME = "openai"
"""`gen_ai.provider.name` of an upstream call unless its client says otherwise: every upstream
but Anthropic's speaks OpenAI's chat API, which is what the attribute discriminates (the model
and `server.address` say whose server it is)."""

log = get_logger("turnkeeper.telemetry")

F = TypeVar("F", bound=Callable[..., Any])

_API = "opentelemetry.trace"
_cached: tuple[object, Tracer | None] = (None, None)
"""The provider last seen and turnkeeper's tracer from it (None when it makes no spans)."""


def tracer() -> Tracer | None:
    """turnkeeper's tracer when a real `TracerProvider` is installed, else None (then nothing is
    traced). Asked at every hook, so a provider installed later is used from then on."""
    global _cached
    trace = sys.modules.get(_API)
    if trace is None:  # OpenTelemetry was never imported: nobody configured it
        return None
    provider = trace.get_tracer_provider()
    seen, found = _cached
    if provider is seen:
        return found
    found = None
    if not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        made = provider.get_tracer("turnkeeper", _version())
        if not isinstance(made, trace.NoOpTracer):
            found = made  # (an SDK provider hands out a no-op tracer when OTEL_SDK_DISABLED)
    _cached = (provider, found)
    return found


def _version() -> str | None:
    """turnkeeper's version as installed (the package itself is a layer above this one)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("turnkeeper")
    except PackageNotFoundError:
        return None


# -- the process's provider --------------------------------------------------------------------


def configure() -> bool:
    """Send traces where the standard variables say: when `OTEL_EXPORTER_OTLP_ENDPOINT` or
    `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (and `OTEL_SDK_DISABLED` is not `true`) and no
    `TracerProvider` is installed yet, install one that batches spans to that endpoint over
    OTLP/HTTP (protobuf). The exporter reads the rest of `OTEL_EXPORTER_OTLP_*` itself
    (headers, timeout, compression, certificates); `OTEL_SERVICE_NAME` overrides the service
    name `turnkeeper`. An application's own provider is left as it is.

    Returns whether turnkeeper's spans go anywhere now. With the variables set but the `otel`
    extra missing, logs `telemetry_unavailable` (a warning) and returns False."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if not any(os.environ.get(name) for name in ENDPOINT_VARIABLES):
        return tracer() is not None
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("telemetry_unavailable", reason=MISSING_OTEL)
        return False
    if tracer() is not None:  # the application installed its own: spans go there
        return True
    resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(
            Resource({"service.name": SERVICE_NAME, "service.version": _version() or ""})
        )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return tracer() is not None


def flush(timeout_millis: int = 5000) -> None:
    """Send the spans a batching provider still holds (the service calls it when it stops:
    a worker process ends without the interpreter's exit hooks)."""
    if tracer() is None:
        return
    provider: Any = sys.modules[_API].get_tracer_provider()
    force_flush = getattr(provider, "force_flush", None)
    if force_flush is not None:
        force_flush(timeout_millis)


# -- spans --------------------------------------------------------------------------------------


def _error_type(exc: BaseException) -> str:
    """`error.type`: an upstream failure's kind (`timeout`, `unreachable`, the status code),
    else the exception's class name."""
    from turnkeeper.errors import UpstreamError, UpstreamTimeout

    if isinstance(exc, UpstreamTimeout):
        return "timeout"
    if isinstance(exc, UpstreamError):
        if exc.status is not None:
            return str(int(exc.status))
        return "unreachable" if exc.unreachable else "bad_response"
    return type(exc).__name__


def _failed(span: Span, exc: BaseException) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", _error_type(exc))
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, str(exc)[:300]))


@contextmanager
def span(
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    client: bool = False,
    answers: tuple[type[BaseException], ...] = (),
) -> Iterator[Span | None]:
    """A span named `name`, current while the block runs (None when nothing is traced). An
    exception leaving the block is recorded on it with `error.type`, unless it is one of
    `answers` (a lookup's "not found" is its answer, not a failure)."""
    found = tracer()
    if found is None:
        yield None
        return
    from opentelemetry.trace import SpanKind

    kind = SpanKind.CLIENT if client else SpanKind.INTERNAL
    with found.start_as_current_span(
        name, kind=kind, attributes=attributes, record_exception=False,
        set_status_on_exception=False,
    ) as made:  # fmt: skip
        try:
            yield made
        except answers:
            raise
        except BaseException as exc:
            _failed(made, exc)
            raise


# -- HTTP requests (the service) --------------------------------------------------------------


class RequestSpan:
    """The SERVER span of one HTTP request, current while the request is served."""

    def __init__(self, made: Span, token: object) -> None:
        self._span = made
        self._token = token

    def end(self, method: str, route: str | None, status: int) -> None:
        from opentelemetry import context

        made = self._span
        if route is not None:
            made.update_name(f"{method} {route}")
            made.set_attribute("http.route", route)
        made.set_attribute("http.response.status_code", status)
        if status >= 500:
            from opentelemetry.trace import Status, StatusCode

            made.set_attribute("error.type", str(status))
            made.set_status(Status(StatusCode.ERROR))
        made.end()
        context.detach(self._token)  # type: ignore[arg-type]


class Untraced:
    """What a hook returns when nothing is traced: every method does nothing."""

    def end(self, *args: Any, **kwargs: Any) -> None:
        pass

    def chunk(self, chunk: Mapping[str, Any]) -> None:
        pass

    answered = chunk

    def failed(self, exc: BaseException) -> None:
        pass


UNTRACED = Untraced()


def http_request(
    method: str, path: str, headers: list[tuple[bytes, bytes]], scheme: str = "http"
) -> RequestSpan | Untraced:
    """Start the SERVER span of a request (a child of the client's `traceparent`, if it sent
    one) and make it current; `end` it with the matched route and the status. When the web
    framework made a SERVER span already (FastAPI's own telemetry does, from 0.165 on, as does
    OpenTelemetry's ASGI instrumentation), that one is the request's span and none is added."""
    found = tracer()
    if found is None:
        return UNTRACED
    from opentelemetry import context, propagate
    from opentelemetry.trace import SpanKind, get_current_span, set_span_in_context

    if getattr(get_current_span(), "kind", None) is SpanKind.SERVER:
        return UNTRACED
    carrier = {name.decode("latin-1"): value.decode("latin-1") for name, value in headers}
    parent = propagate.extract(carrier)
    made = found.start_span(
        method,
        context=parent,
        kind=SpanKind.SERVER,
        attributes={"http.request.method": method, "url.path": path, "url.scheme": scheme},
    )
    return RequestSpan(made, context.attach(set_span_in_context(made, parent)))


# -- context builds -----------------------------------------------------------------------------


def traced_build(build: F) -> F:
    """Decorate the service's context operation: each window it hands out (built now or
    remembered) is a `search_memory` span saying what was kept, dropped and summarized."""

    @functools.wraps(build)
    def traced(*args: Any, **kwargs: Any) -> Any:
        if tracer() is None:
            return build(*args, **kwargs)
        with span("search_memory", {"gen_ai.operation.name": "search_memory"}) as made:
            window = build(*args, **kwargs)
            if made is not None:
                describe_window(made, window)
            return window

    return cast(F, traced)


def describe_window(made: Span, window: ContextWindow) -> None:
    """A build's report as attributes of its span, and the events of what it left out."""
    report: ContextReport = window.report
    left_out = report.dropped_seqs | report.summarized_seqs
    attributes: dict[str, Any] = {
        "gen_ai.conversation.id": report.session_id,
        "gen_ai.memory.record.count": report.messages_included,
        "turnkeeper.context.strategy": str(report.strategy),
        "turnkeeper.context.budget_tokens": report.budget,
        "turnkeeper.context.tokens_used": report.tokens_used,
        "turnkeeper.context.encoding": report.encoding,
        "turnkeeper.context.messages_in_store": report.messages_in_store,
        "turnkeeper.context.messages_loaded": report.messages_loaded,
        "turnkeeper.context.messages_included": report.messages_included,
        "turnkeeper.context.messages_dropped": report.messages_dropped,
        "turnkeeper.context.messages_summarized": report.messages_summarized,
    }
    if left_out.last is not None:
        attributes["turnkeeper.context.cut_seq"] = left_out.last
    made.set_attributes(attributes)
    if report.dropped_seqs:
        made.add_event(
            "turnkeeper.context.dropped",
            {
                "turnkeeper.context.messages_dropped": report.messages_dropped,
                "turnkeeper.context.dropped_seqs": str(report.dropped_seqs),
            },
        )
    if report.summarized_seqs:
        summary_tokens = sum(m.tokens for m in window.messages if m.kind == "summary")
        made.add_event(
            "turnkeeper.context.compacted",
            {
                "turnkeeper.context.messages_summarized": report.messages_summarized,
                "turnkeeper.context.summarized_seqs": str(report.summarized_seqs),
                "turnkeeper.context.summary_tokens": summary_tokens,
            },
        )


# -- upstream model calls -----------------------------------------------------------------------

_REQUEST_ATTRIBUTES = {
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
}


class ChatCall:
    """The `chat {model}` span of one upstream call: started when the call is, told the
    answer (a whole completion, or each chunk of a stream) and ended with it."""

    def __init__(self, made: Span) -> None:
        self._span = made
        self._finish_reasons: list[str] = []
        self._ended = False

    def chunk(self, chunk: Mapping[str, Any]) -> None:
        """What a stream chunk, or a whole completion, says of the response: the model, the
        id, finish reasons and usage (OpenAI's `usage` in the conventions' names)."""
        made = self._span
        message = chunk.get("message")  # Anthropic's `message_start` event carries the message
        described = message if isinstance(message, Mapping) else chunk
        if described.get("model"):
            made.set_attribute("gen_ai.response.model", str(described["model"]))
        if described.get("id"):
            made.set_attribute("gen_ai.response.id", str(described["id"]))
        usage = described.get("usage")
        if isinstance(usage, Mapping):
            made.set_attributes(_usage_attributes(usage))
        for choice in chunk.get("choices") or ():
            if isinstance(choice, Mapping) and choice.get("finish_reason"):
                self._finish_reasons.append(str(choice["finish_reason"]))
        delta = chunk.get("delta")  # Anthropic: a whole message's, or `message_delta`'s
        stopped = (delta if isinstance(delta, Mapping) else chunk).get("stop_reason")
        if stopped:
            self._finish_reasons.append(str(stopped))

    answered = chunk

    def failed(self, exc: BaseException) -> None:
        _failed(self._span, exc)
        self.end()

    def end(self) -> None:
        """End the span (once: a stream is closed after it ended)."""
        if self._ended:
            return
        self._ended = True
        if self._finish_reasons:
            self._span.set_attribute("gen_ai.response.finish_reasons", self._finish_reasons)
        self._span.end()


def _usage_attributes(usage: Mapping[str, Any]) -> dict[str, int]:
    """A `usage` object, OpenAI's or Anthropic's, in the GenAI conventions' names."""
    if "prompt_tokens" in usage or "completion_tokens" in usage:
        return _openai_usage(usage)
    return _anthropic_usage(usage)


def _anthropic_usage(usage: Mapping[str, Any]) -> dict[str, int]:
    """Anthropic's `usage`: its `input_tokens` leaves out the prompt cache's reads and writes,
    which the conventions count as input, so they are added back. A stream's `message_delta`
    may carry only the output so far: what is absent is left as an earlier event set it."""
    counts = {key: value for key, value in usage.items() if isinstance(value, int)}
    found: dict[str, int] = {}
    if "output_tokens" in counts:
        found["gen_ai.usage.output_tokens"] = counts["output_tokens"]
    for key, name in (
        ("cache_read_input_tokens", "gen_ai.usage.cache_read.input_tokens"),
        ("cache_creation_input_tokens", "gen_ai.usage.cache_creation.input_tokens"),
    ):
        if key in counts:
            found[name] = counts[key]
    if "input_tokens" in counts:
        cached = counts.get("cache_read_input_tokens", 0)
        written = counts.get("cache_creation_input_tokens", 0)
        found["gen_ai.usage.input_tokens"] = counts["input_tokens"] + cached + written
    return found


def _openai_usage(usage: Mapping[str, Any]) -> dict[str, int]:
    """OpenAI's `usage` in the GenAI conventions' names (cached and reasoning tokens too)."""
    found: dict[str, int] = {}
    for key, name in (
        ("prompt_tokens", "gen_ai.usage.input_tokens"),
        ("completion_tokens", "gen_ai.usage.output_tokens"),
    ):
        if isinstance(usage.get(key), int):
            found[name] = usage[key]
    for details, key, name in (
        ("prompt_tokens_details", "cached_tokens", "gen_ai.usage.cache_read.input_tokens"),
        ("completion_tokens_details", "reasoning_tokens", "gen_ai.usage.reasoning.output_tokens"),
    ):
        part = usage.get(details)
        if isinstance(part, Mapping) and isinstance(part.get(key), int):
            found[name] = part[key]
    return found


def chat_call(
    body: Mapping[str, Any], base_url: str, *, stream: bool, provider: str = PROVIDER_NAME
) -> ChatCall | Untraced:
    """Start the CLIENT span of a call to `base_url` with the request `body` (not current:
    a stream's span ends on another thread). End it with `end` or `failed`."""
    found = tracer()
    if found is None:
        return UNTRACED
    from opentelemetry.trace import SpanKind

    model = str(body.get("model") or "")
    address = urlsplit(base_url)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,  # the attribute's name before semconv 1.37
        "gen_ai.request.stream": stream,
        "server.address": address.hostname or "",
    }
    if model:
        attributes["gen_ai.request.model"] = model
    if address.port is not None:
        attributes["server.port"] = address.port
    for key, name in _REQUEST_ATTRIBUTES.items():
        value = body.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            attributes[name] = value
    name = f"chat {model}" if model else "chat"
    return ChatCall(found.start_span(name, kind=SpanKind.CLIENT, attributes=attributes))


# -- store operations ---------------------------------------------------------------------------

_UNTRACED_OPERATIONS = frozenset({"close", "exclusive_lock"})
"""Store methods that are no database call of their own (a lock is held across many)."""


def _operations() -> frozenset[str]:
    """The methods of the store contract and its capabilities (`storage.base`)."""
    from turnkeeper.storage import base

    protocols = [
        value
        for value in vars(base).values()
        if isinstance(value, type) and getattr(value, "_is_protocol", False)
    ]
    return (
        frozenset(
            name
            for protocol in protocols
            for name, value in vars(protocol).items()
            if callable(value) and not name.startswith("_")
        )
        - _UNTRACED_OPERATIONS
    )


_OPERATION_NAMES = {"append_messages_versioned": "append_messages"}
"""Span names of store methods that are another's variant: an append is `append_messages`
whether or not the cache in front asked for the version it wrote."""


def _db_system(url: str) -> str:
    scheme = url.split("://", 1)[0].lower() if "://" in url else "sqlite"
    return {"postgres": "postgresql", "postgresql": "postgresql"}.get(scheme, scheme)


class TracedStore:
    """A store whose every contract call is a CLIENT span (`db.system.name`,
    `db.operation.name`: the method). Delegates everything, so it has exactly the
    capabilities of the store it wraps."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self._system = _db_system(inner.url)
        self._traced = _operations()

    def __getattr__(self, name: str) -> Any:
        if name in ("inner", "_traced", "_system"):  # not set yet: don't recurse
            raise AttributeError(name)
        value = getattr(self.inner, name)
        if name not in self._traced or not callable(value):
            return value
        operation_name = _OPERATION_NAMES.get(name, name)
        attributes = {"db.system.name": self._system, "db.operation.name": operation_name}
        from turnkeeper.errors import NotFound

        @functools.wraps(value)
        def operation(*args: Any, **kwargs: Any) -> Any:
            if tracer() is None:
                return value(*args, **kwargs)
            with span(operation_name, attributes, client=True, answers=(NotFound,)):
                return value(*args, **kwargs)

        cast(MutableMapping[str, Any], self.__dict__)[name] = operation  # found directly next time
        return operation


def traced_store(store: Store) -> Store:
    """`store` with a span per operation when something is traced now, else `store` itself
    (decided when the store is opened: configure tracing before `turnkeeper.open()`)."""
    if tracer() is None:
        return store
    return cast("Store", TracedStore(store))
