"""Traces to OpenTelemetry, received by a real OTLP/HTTP collector on loopback.

The collector is a small HTTP server that accepts `POST /v1/traces` and decodes each
`ExportTraceServiceRequest` (protobuf) with `opentelemetry-proto`, as a real collector does.
What sends to it runs in a process of its own, configured only by the standard variables
(`OTEL_EXPORTER_OTLP_ENDPOINT`, …), because OpenTelemetry's tracer provider is one per process:
`turnkeeper serve` against the recording fake model, and a script using the library.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.server.anthropic_upstream import AnthropicUpstream, make_anthropic_app
from tests.server.live import LiveServer
from tests.server.upstream import Upstream, make_app

ROOT = Path(__file__).resolve().parents[1]
SERVER, CLIENT, INTERNAL = 2, 3, 1  # OTLP's span kinds


@dataclass
class Span:
    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    status: int
    resource: dict[str, Any]


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, which) if which else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


@dataclass
class Collector:
    """An OTLP/HTTP trace receiver: every span it was sent, decoded."""

    url: str = ""
    spans: list[Span] = field(default_factory=list)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def receive(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        received = []
        for resource_spans in request.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        Span(
                            name=span.name,
                            kind=span.kind,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            attributes=_attributes(span.attributes),
                            events=[(e.name, _attributes(e.attributes)) for e in span.events],
                            status=span.status.code,
                            resource=resource,
                        )
                    )
        with self.lock:
            self.requests += 1
            self.spans.extend(received)

    def named(self, name: str) -> list[Span]:
        with self.lock:
            return [span for span in self.spans if span.name == name]

    def wait_for(self, what: Callable[[], bool], within: float = 20) -> None:
        deadline = time.monotonic() + within
        while not what():
            assert time.monotonic() < deadline, f"spans never came: {[s.name for s in self.spans]}"
            time.sleep(0.05)


@pytest.fixture
def collector() -> Iterator[Collector]:
    received = Collector()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            received.receive(body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    received.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def fake_model() -> Iterator[tuple[Upstream, str]]:
    state = Upstream(cached_tokens=7)
    with LiveServer(make_app(state)) as live:
        yield state, live.url


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without turnkeeper's or OpenTelemetry's settings, plus `extra`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("TURNKEEPER_", "OTEL_"))
    }
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return env | {"PYTHONPATH": path, "TURNKEEPER_CONFIG": os.devnull} | extra


def otel_env(collector: Collector, **extra: str) -> dict[str, str]:
    # spans leave in batches every 100 ms instead of every 5 s
    return clean_env(
        OTEL_EXPORTER_OTLP_ENDPOINT=collector.url, OTEL_BSP_SCHEDULE_DELAY="100", **extra
    )


# -- the service ----------------------------------------------------------------------------------


def serve_traced(env: dict[str, str], database: Path) -> tuple[subprocess.Popen[str], str]:
    """`turnkeeper serve` (keys off) in a process of its own, and its URL once it answers."""
    process = subprocess.Popen(
        [sys.executable, "-m", "turnkeeper", "serve", "--no-auth", "--port", "0",
         "--db", f"sqlite:///{database}", "--log-level", "warning"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    banner = process.stderr.readline()
    match = re.search(r"serving on (http://\S+)", banner)
    assert match, banner
    with httpx.Client(base_url=match.group(1), timeout=30) as client:
        for _ in range(200):
            try:
                client.get("/readyz")
                break
            except httpx.TransportError:
                time.sleep(0.05)
    return process, match.group(1)


def test_the_service_sends_request_context_model_and_store_spans_to_the_collector(
    collector: Collector, fake_model: tuple[Upstream, str], tmp_path: Path
) -> None:
    upstream, upstream_url = fake_model
    env = otel_env(
        collector,
        TURNKEEPER_LLM_BASE_URL=f"{upstream_url}/v1",
        TURNKEEPER_LLM_MODEL="test-model",
        TURNKEEPER_LLM_MAX_RETRIES="0",
    )
    process, url = serve_traced(env, tmp_path / "served.db")
    try:
        with httpx.Client(base_url=url, timeout=30) as client:
            client.post("/v1/sessions", json={"key": "traced"})
            for n in range(6):
                role = "user" if n % 2 == 0 else "assistant"
                client.post(
                    "/v1/sessions/traced/messages",
                    json={"role": role, "content": f"turn {n} " + "padding " * 40},
                )
            answer = client.post(
                "/v1/sessions/traced/chat",
                json={"content": "What did I say first?", "strategy": "sliding_window",
                      "budget_tokens": 200},
            )  # fmt: skip
            assert answer.status_code == 200, answer.text
            reply_seq = answer.json()["reply"]["seq"]
            trace = client.get(f"/v1/sessions/traced/messages/{reply_seq}/trace").json()
            streamed = client.post(
                "/v1/sessions/traced/chat", json={"content": "Stream it", "stream": True}
            )
            assert "event: done" in streamed.text, streamed.text
    finally:
        process.terminate()  # the app's shutdown sends what is still batched
        process.wait(timeout=20)
        assert process.stderr is not None
        process.stderr.close()

    collector.wait_for(lambda: len(collector.named("chat test-model")) == 2)
    collector.wait_for(
        lambda: any(s.attributes.get("http.route", "").endswith("/chat") for s in collector.spans)
    )
    # the request's SERVER span: FastAPI's own when it makes one (0.165 on), else turnkeeper's
    chats = collector.named("chat test-model")
    (call,) = [s for s in chats if s.attributes["gen_ai.request.stream"] is False]
    (streaming,) = [s for s in chats if s.attributes["gen_ai.request.stream"] is True]
    served = collector.named("POST /v1/sessions/{session}/chat")
    (request,) = [s for s in served if s.trace_id == call.trace_id]
    (streamed_request,) = [s for s in served if s.trace_id == streaming.trace_id]
    assert request.kind == SERVER and request.parent_id == ""
    assert request.attributes["http.request.method"] == "POST"
    assert request.attributes["http.route"] == "/v1/sessions/{session}/chat"
    assert request.attributes["url.path"] == "/v1/sessions/traced/chat"
    assert request.attributes["http.response.status_code"] == 200
    assert request.resource["service.name"] == "turnkeeper"

    # the context build: what the trace turnkeeper stored says was kept and dropped
    in_request = [s for s in collector.spans if s.trace_id == request.trace_id]
    parent_of = {s.span_id: s.parent_id for s in in_request}

    def under_request(span: Span) -> bool:  # the framework may put spans of its own between
        parent = span.parent_id
        while parent and parent != request.span_id:
            parent = parent_of.get(parent, "")
        return parent == request.span_id

    (build,) = [s for s in collector.named("search_memory") if s.trace_id == request.trace_id]
    assert under_request(build)
    assert build.attributes["gen_ai.operation.name"] == "search_memory"
    assert build.attributes["gen_ai.conversation.id"] == answer.json()["session"]["id"]
    assert build.attributes["turnkeeper.context.strategy"] == "sliding_window"
    assert build.attributes["turnkeeper.context.budget_tokens"] == 200
    assert build.attributes["turnkeeper.context.tokens_used"] == trace["tokens_sent"]
    assert build.attributes["turnkeeper.context.messages_included"] == len(trace["kept_seqs"])
    assert build.attributes["gen_ai.memory.record.count"] == len(trace["kept_seqs"])
    dropped = [seq for first, last in trace["dropped_seqs"] for seq in range(first, last + 1)]
    assert dropped and build.attributes["turnkeeper.context.messages_dropped"] == len(dropped)
    assert build.attributes["turnkeeper.context.cut_seq"] == max(dropped)
    assert build.attributes["turnkeeper.context.messages_summarized"] == 0
    events = dict(build.events)
    assert events["turnkeeper.context.dropped"]["turnkeeper.context.messages_dropped"] == len(
        dropped
    )
    assert "turnkeeper.context.compacted" not in events

    # the upstream call, in the GenAI conventions' terms, usage as the fake model reported it
    assert call.kind == CLIENT and under_request(call)
    sent = upstream.requests[0]
    usage = upstream.usage_for(sent, upstream.reply_for(sent))
    assert call.attributes["gen_ai.operation.name"] == "chat"
    assert call.attributes["gen_ai.provider.name"] == "openai"
    assert call.attributes["gen_ai.request.model"] == "test-model"
    assert call.attributes["gen_ai.response.model"] == "test-model"
    assert call.attributes["gen_ai.usage.input_tokens"] == usage["prompt_tokens"]
    assert call.attributes["gen_ai.usage.output_tokens"] == usage["completion_tokens"]
    assert call.attributes["gen_ai.usage.output_tokens"] == trace["usage"]["output_tokens"]
    assert call.attributes["gen_ai.usage.cache_read.input_tokens"] == 7
    assert call.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert call.attributes["server.address"] == "127.0.0.1"

    # the store operations of the same request: under the request, some under its context build
    store_calls = [s for s in in_request if "db.operation.name" in s.attributes]
    operations = {s.attributes["db.operation.name"] for s in store_calls}
    assert "append_messages" in operations, operations
    assert any(name.startswith("read_messages") for name in operations), operations
    # a lookup that finds nothing answered: it did not fail
    assert all(s.status != 2 for s in store_calls)
    assert all(s.kind == CLIENT and s.attributes["db.system.name"] == "sqlite" for s in store_calls)
    assert all(s.name == s.attributes["db.operation.name"] for s in store_calls)
    assert all(under_request(s) for s in store_calls)
    assert any(s.parent_id == build.span_id for s in store_calls)

    # a streamed answer: its span ends with the stream, with the usage of its last chunk; the
    # reply is stored by a thread of its own, still within the request's trace
    assert streaming.parent_id and streamed_request.parent_id == ""
    assert streaming.attributes["gen_ai.usage.cache_read.input_tokens"] == 7
    assert streaming.attributes["gen_ai.usage.output_tokens"] > 0
    assert streaming.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    stored = [
        s for s in collector.spans
        if s.trace_id == streaming.trace_id and s.attributes.get("db.operation.name") == "append_messages"
    ]  # fmt: skip
    assert len(stored) == 2  # the user's turn, then the reply with its trace


def test_an_anthropic_upstream_call_is_named_anthropic_with_its_usage_in_the_conventions(
    collector: Collector, tmp_path: Path
) -> None:
    model = AnthropicUpstream(cache_read=900, cache_creation=120)
    with LiveServer(make_anthropic_app(model)) as upstream:
        env = otel_env(
            collector,
            ANTHROPIC_BASE_URL=upstream.url,
            ANTHROPIC_API_KEY="anthropic-secret",
            TURNKEEPER_LLM_MAX_RETRIES="0",
        )
        process, url = serve_traced(env, tmp_path / "anthropic.db")
        try:
            ask = {"model": "claude-test", "max_tokens": 64}
            headers = {"X-Turnkeeper-Session": "traced-anthropic"}
            with httpx.Client(base_url=url, timeout=30, headers=headers) as client:
                whole = client.post(
                    "/v1/messages",
                    json=ask | {"messages": [{"role": "user", "content": "Hello there"}]},
                )
                assert whole.status_code == 200, whole.text
                streamed = client.post(
                    "/v1/messages",
                    json=ask | {"stream": True,
                                "messages": [{"role": "user", "content": "And again"}]},
                )  # fmt: skip
                assert "event: message_stop" in streamed.text, streamed.text
        finally:
            process.terminate()
            process.wait(timeout=20)
            assert process.stderr is not None
            process.stderr.close()

    collector.wait_for(lambda: len(collector.named("chat claude-test")) == 2)
    calls = collector.named("chat claude-test")
    (call,) = [s for s in calls if s.attributes["gen_ai.request.stream"] is False]
    (streaming,) = [s for s in calls if s.attributes["gen_ai.request.stream"] is True]
    sent = whole.json()["usage"]
    for span in (call, streaming):
        assert span.attributes["gen_ai.provider.name"] == "anthropic"
        assert span.attributes["gen_ai.usage.cache_read.input_tokens"] == 900
        assert span.attributes["gen_ai.usage.cache_creation.input_tokens"] == 120
        assert span.attributes["gen_ai.response.finish_reasons"] == ["end_turn"]
        assert span.attributes["server.port"] == int(upstream.url.rsplit(":", 1)[1])
    # the conventions count the prompt cache's reads and writes as input; Anthropic does not
    upstream_input = model.usage_for(model.requests[0], "")["input_tokens"]
    assert call.attributes["gen_ai.usage.input_tokens"] == upstream_input + 900 + 120
    assert call.attributes["gen_ai.usage.output_tokens"] == sent["output_tokens"]
    assert call.attributes["gen_ai.response.id"].startswith("msg_")
    # a stream's output count is its last `message_delta`'s, not `message_start`'s placeholder
    assert streaming.attributes["gen_ai.usage.output_tokens"] > 1


# -- the library ------------------------------------------------------------------------------

LIBRARY_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import turnkeeper
    from turnkeeper import telemetry
    from turnkeeper.llm import LLMClient
    from turnkeeper.turns import ChatTurns

    configured = telemetry.configure()
    with turnkeeper.open(sys.argv[1]) as tk:
        session, _ = tk.get_or_create_session("library")
        for n in range(10):
            tk.append(session, "user" if n % 2 == 0 else "assistant", f"turn {n} " + "words " * 30)
        window = tk.context(session, strategy="summarize", budget_tokens=300, keep_recent=2)
        with ChatTurns(tk, LLMClient(sys.argv[2], max_retries=0)) as chat:
            chat.turn(session, "And now?", options=turnkeeper.turns.TurnOptions(model="m-1"))
    nobody = LLMClient("http://127.0.0.1:9/v1", max_retries=0)  # nothing listens there
    try:
        nobody.complete({"model": "m-2", "messages": [{"role": "user", "content": "hi"}]})
    except turnkeeper.UpstreamError:
        pass
    report = window.report
    json.dump({
        "configured": configured,
        "included": report.messages_included,
        "summarized": report.messages_summarized,
        "summarized_seqs": list(report.summarized_seqs),
        "dropped": report.messages_dropped,
    }, sys.stdout)
    """
)


def run_script(script: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, *args], env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip


def test_the_library_sends_its_spans_where_the_standard_variables_say(
    collector: Collector, fake_model: tuple[Upstream, str], tmp_path: Path
) -> None:
    _, upstream_url = fake_model
    done = run_script(
        LIBRARY_SCRIPT,
        otel_env(collector, OTEL_SERVICE_NAME="support-bot"),
        f"sqlite:///{tmp_path / 'library.db'}",
        f"{upstream_url}/v1",
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # nothing printed by the library
    said = json.loads(done.stdout)
    assert said["configured"] is True and said["summarized"] > 0

    collector.wait_for(lambda: bool(collector.named("chat m-1")))  # sent at exit
    builds = collector.named("search_memory")
    summarized = next(
        s for s in builds if s.attributes["turnkeeper.context.strategy"] == "summarize"
    )
    assert summarized.resource["service.name"] == "support-bot"
    assert summarized.attributes["turnkeeper.context.messages_summarized"] == said["summarized"]
    assert summarized.attributes["turnkeeper.context.messages_included"] == said["included"]
    assert summarized.attributes["turnkeeper.context.cut_seq"] == max(said["summarized_seqs"])
    compacted = dict(summarized.events)["turnkeeper.context.compacted"]
    assert compacted["turnkeeper.context.messages_summarized"] == said["summarized"]
    assert compacted["turnkeeper.context.summary_tokens"] > 0
    # the store calls the build made are its children
    children = [s for s in collector.spans if s.parent_id == summarized.span_id]
    assert any(s.attributes.get("db.operation.name", "").startswith("read_") for s in children)
    # the turn's upstream call carries the cached tokens the fake model reported
    (call,) = collector.named("chat m-1")
    assert call.attributes["gen_ai.usage.cache_read.input_tokens"] == 7
    assert call.attributes["gen_ai.request.stream"] is False
    # a call that failed says how
    (failed,) = collector.named("chat m-2")
    assert failed.status == 2 and failed.attributes["error.type"] == "unreachable"
    assert failed.attributes["server.port"] == 9
    assert "gen_ai.usage.input_tokens" not in failed.attributes


# -- off unless configured ------------------------------------------------------------------------

OFF_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import turnkeeper
    from turnkeeper import telemetry
    from turnkeeper.telemetry import TracedStore

    configured = telemetry.configure()
    with turnkeeper.open(sys.argv[1]) as tk:
        session, _ = tk.get_or_create_session("quiet")
        tk.append(session, "user", "hello")
        tk.context(session)
        wrapped = isinstance(tk.store, TracedStore) or isinstance(
            getattr(tk.store, "inner", None), TracedStore
        )
    json.dump({
        "configured": configured,
        "tracer": telemetry.tracer() is not None,
        "sdk": "opentelemetry.sdk.trace" in sys.modules,
        "exporter": any(name.startswith("opentelemetry.exporter") for name in sys.modules),
        "wrapped": wrapped,
    }, sys.stdout)
    """
)


@pytest.mark.parametrize(
    "variables",
    [{}, {"OTEL_SDK_DISABLED": "true"}],
    ids=["no endpoint", "endpoint but sdk disabled"],
)
def test_nothing_is_traced_or_printed_unless_configured(
    collector: Collector, tmp_path: Path, variables: dict[str, str]
) -> None:
    env = otel_env(collector, **variables) if variables else clean_env()
    done = run_script(OFF_SCRIPT, env, f"sqlite:///{tmp_path / 'quiet.db'}")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert json.loads(done.stdout) == {
        "configured": False, "tracer": False, "sdk": False, "exporter": False, "wrapped": False,
    }  # fmt: skip
    time.sleep(0.3)  # what a batch would have waited
    assert collector.requests == 0


OWN_PROVIDER_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    import turnkeeper
    from turnkeeper import telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    configured = telemetry.configure()  # the application's provider stays
    app = trace.get_tracer("app")
    with app.start_as_current_span("handle message") as outer:
        with turnkeeper.open(sys.argv[1]) as tk:
            session, _ = tk.get_or_create_session("embedded")
            tk.append(session, "user", "hello")
            tk.context(session)

    async def handle() -> int:  # the async face runs the core on threads, in the caller's context
        with app.start_as_current_span("handle async") as span:
            async with turnkeeper.open_async(sys.argv[1]) as atk:
                await atk.append("embedded", "user", "again")
                await atk.context("embedded")
        return span.get_span_context().span_id

    async_outer = asyncio.run(handle())
    spans = exporter.get_finished_spans()
    builds = [s for s in spans if s.name == "search_memory"]
    json.dump({
        "configured": configured,
        "same_provider": trace.get_tracer_provider() is provider,
        "build_parents": [
            b.parent.span_id in (outer.get_span_context().span_id, async_outer) for b in builds
        ],
        "operations": sorted({s.attributes.get("db.operation.name", "") for s in spans} - {""}),
        "systems": sorted({s.attributes.get("db.system.name", "") for s in spans} - {""}),
    }, sys.stdout)
    """
)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_an_application_s_own_provider_gets_turnkeeper_s_spans(
    collector: Collector, tmp_path: Path, request: pytest.FixtureRequest, backend: str
) -> None:
    url = (
        f"sqlite:///{tmp_path / 'embedded.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    done = run_script(OWN_PROVIDER_SCRIPT, otel_env(collector), url)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["configured"] is True and said["same_provider"] is True
    assert said["build_parents"] == [True, True]  # under the sync and the async caller's span
    assert "append_messages" in said["operations"]
    assert said["systems"] == [backend]
    time.sleep(0.3)
    assert collector.requests == 0  # turnkeeper installed no exporter of its own


OWN_REQUEST_SPAN_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import httpx
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route
    from turnkeeper.server.observability import RequestObserver
    from tests.server.live import LiveServer

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    def hello(request):
        inner = trace.get_tracer("app").start_span("inside")
        inner.end()
        return PlainTextResponse("hi", status_code=503 if "fail" in request.query_params else 200)

    app = RequestObserver(Starlette(routes=[Route("/hello/{name}", hello)]))
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with LiveServer(app) as live:
        httpx.get(f"{live.url}/hello/ana", headers={"traceparent": parent})
        httpx.get(f"{live.url}/hello/bo?fail=1")
    spans = exporter.get_finished_spans()
    json.dump([
        {"name": s.name, "kind": s.kind.name, "attributes": dict(s.attributes),
         "trace_id": format(s.context.trace_id, "032x"),
         "parent": format(s.parent.span_id, "016x") if s.parent else None,
         "span_id": format(s.context.span_id, "016x"), "status": s.status.status_code.name}
        for s in spans
    ], sys.stdout)
    """
)


def test_a_request_is_a_server_span_of_turnkeeper_s_own_where_the_framework_makes_none(
    tmp_path: Path,
) -> None:
    env = clean_env(PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    done = run_script(OWN_REQUEST_SPAN_SCRIPT, env)
    assert done.returncode == 0, done.stderr
    spans = json.loads(done.stdout)
    by_path = {span["attributes"].get("url.path"): span for span in spans}
    inside = [span for span in spans if span["name"] == "inside"]
    ok, failed = by_path["/hello/ana"], by_path["/hello/bo"]
    assert ok["name"] == failed["name"] == "GET /hello/{name}"
    assert ok["kind"] == "SERVER"
    assert ok["attributes"] == {
        "http.request.method": "GET", "url.path": "/hello/ana", "url.scheme": "http",
        "http.route": "/hello/{name}", "http.response.status_code": 200,
    }  # fmt: skip
    # a child of the caller's traceparent, and the parent of what the handler traces
    assert ok["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert ok["parent"] == "b7ad6b7169203331"
    assert inside[0]["parent"] == ok["span_id"]
    failed = next(
        s for s in json.loads(done.stdout) if s["attributes"].get("url.path") == "/hello/bo"
    )
    assert failed["status"] == "ERROR"
    assert failed["attributes"]["error.type"] == "503"


def test_serve_without_the_otel_extra_logs_what_to_install_and_serves(
    collector: Collector, tmp_path: Path
) -> None:
    hidden = ["opentelemetry.sdk", "opentelemetry.exporter"]
    code = f"import sys; sys.modules.update(dict.fromkeys({hidden!r})); " + (
        "from turnkeeper.cli import main; sys.argv[0] = 'turnkeeper'; main()"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code, "serve", "--no-auth", "--port", "0", "--log-format", "json",
         "--db", f"sqlite:///{tmp_path / 'served.db'}"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=otel_env(collector), text=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        lines = []  # the banner's lines, then the warning
        while len(lines) < 10 and "telemetry_unavailable" not in "".join(lines):
            lines.append(process.stderr.readline())
        match = re.search(r"serving on (http://\S+)", lines[0])
        assert match, lines
        for _ in range(200):
            try:
                assert httpx.get(f"{match.group(1)}/readyz").status_code == 200
                break
            except httpx.TransportError:
                time.sleep(0.05)
    finally:
        process.terminate()
        process.wait(timeout=20)
        assert process.stderr is not None
        process.stderr.close()
    events = [json.loads(line) for line in lines if line.startswith("{")]
    (warning,) = [e for e in events if e["event"] == "telemetry_unavailable"]
    assert warning["level"] == "warning"
    assert warning["reason"].endswith("pip install 'turnkeeper[otel]'")
    assert collector.requests == 0
