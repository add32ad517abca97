"""A small client for any OpenAI-compatible chat endpoint (OpenAI, vLLM, Ollama, llama.cpp …),
and, through a `ChatAPI` of its own, for Anthropic's Messages API (`turnkeeper.anthropic_turns`).

Only what the chat turn and the proxies need: one `POST {base_url}/chat/completions` (the
`ChatAPI`'s path), either whole or as server-sent events, and `GET {base_url}/models`. It speaks the wire format as plain JSON objects rather than through
an SDK's typed models, because the proxy must hand the upstream's answer back unchanged in
shape, unknown fields included.

Every failure is mapped here, once, onto our own tree: a timeout is `UpstreamTimeout`; an
unreachable endpoint, an error status or an unusable body is `UpstreamError` (with the
upstream's status and `Retry-After` when it answered). Nothing above this module sees an httpx
exception.

Transient failures (429, 5xx, a refused connection) are retried here a bounded number of times
(`llm_max_retries`) with exponential backoff, or after the upstream's own `Retry-After` when it
sends one that fits in `llm_timeout`. A timeout is not retried: the caller has waited enough.
A stream is retried only while opening, before anything was relayed.

Each call (its retries included) is a `chat {model}` span when tracing is configured
(`turnkeeper.telemetry`), ended when the answer is whole: for a stream, at its last chunk.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from turnkeeper import metrics, telemetry
from turnkeeper.config import Settings
from turnkeeper.errors import InvalidConfig, UpstreamError, UpstreamTimeout
from turnkeeper.types import Usage

try:
    import httpx
except ImportError:  # pragma: no cover - the `llm` extra is missing
    # The module still imports (the library's public names include the turn helper); only
    # building a client needs httpx, and says so.
    httpx = None  # type: ignore[assignment]

MISSING_HTTPX = "talking to a model needs httpx: pip install 'turnkeeper[llm]'"

T = TypeVar("T")

Observer = Callable[[str, float], None]
"""Told `(outcome, seconds)` after every upstream call: `ok`, `timeout`, `unreachable`,
`status_<code>` or `bad_response`. Calls are counted in `turnkeeper.metrics` whatever it is;
the observer is for a caller who wants to see them too."""


def _ignore(outcome: str, seconds: float) -> None:
    """The default observer."""


def _recorded(observer: Observer) -> Observer:
    """Every call is counted in `turnkeeper.metrics` (`metrics.upstream`), then told to the
    caller's own `observer`, if any."""

    def observe(outcome: str, seconds: float) -> None:
        metrics.upstream(outcome, seconds)
        observer(outcome, seconds)

    return observe


NO_MODEL_LIST = frozenset({404, 405, 501})
"""Upstream answers to `GET /models` meaning it keeps no list (many local servers)."""

RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})
"""Upstream answers worth another try: rate limits and server-side failures."""


def _retryable(error: UpstreamError) -> bool:
    if isinstance(error, UpstreamTimeout):
        return False
    return error.status in RETRIED_STATUSES or (error.status is None and error.unreachable)


def _retry_after_seconds(value: str | None) -> float | None:
    """`Retry-After` as seconds to wait: delta-seconds or an HTTP date (RFC 9110 10.2.3)."""
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


@dataclass(frozen=True, slots=True)
class ChatAPI:
    """Which chat API an `LLMClient` speaks: the path it posts to (under the base URL), how the
    key is sent, headers every request carries, and the list a whole answer must hold to be
    one. Everything else (retries, timeouts, failures, event streams, spans) is the same for
    every provider."""

    path: str
    key_headers: Callable[[str], dict[str, str]]
    answer_list: str
    headers: Mapping[str, str] = field(default_factory=dict)
    provider: str = "openai"
    """Whose API it is, as traces name it (`gen_ai.provider.name`)."""


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


OPENAI_CHAT = ChatAPI("/chat/completions", _bearer, "choices")
"""OpenAI's chat completions (and every server compatible with them)."""


class LLMClient:
    """Calls one chat endpoint (OpenAI-compatible unless `api` says otherwise) with a fixed key
    and timeout.

    `transport` lets a caller supply its own httpx transport (e.g. to reach a test server on a
    Unix socket); by default httpx's own is used. Thread-safe, like `httpx.Client`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
        observer: Observer = _ignore,
        max_retries: int = 2,
        backoff: float = 0.5,
        api: ChatAPI = OPENAI_CHAT,
    ) -> None:
        if httpx is None:
            raise InvalidConfig("llm_base_url", MISSING_HTTPX)
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.backoff = backoff
        self.timeout = timeout
        self.api = api
        headers = {**api.headers, **(api.key_headers(api_key) if api_key else {})}
        self._http = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )
        self._observe = _recorded(observer)

    @classmethod
    def from_settings(cls, settings: Settings, *, observer: Observer = _ignore) -> LLMClient:
        return cls(
            settings.llm_base_url,
            api_key=settings.llm_api_key,
            timeout=settings.llm_timeout.total_seconds(),
            observer=observer,
            max_retries=settings.llm_max_retries,
            backoff=settings.llm_retry_backoff.total_seconds(),
        )

    def close(self) -> None:
        self._http.close()

    def _with_retries(self, call: Callable[[], T]) -> T:
        """`call`, again after a transient failure, at most `max_retries` more times."""
        for attempt in range(self.max_retries + 1):
            try:
                return call()
            except UpstreamError as exc:
                if attempt == self.max_retries or not _retryable(exc):
                    raise
                wait = _retry_after_seconds(exc.retry_after)
                if wait is None or wait > self.timeout:
                    wait = self.backoff * 2**attempt
                time.sleep(wait)
        raise AssertionError("unreachable")  # the last attempt returns or raises

    def complete(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A whole chat completion: the upstream's JSON object, as it sent it."""
        call, data = self._traced(body, False, lambda: self._complete_once(body))
        call.answered(data)
        call.end()
        return data

    def stream(self, body: Mapping[str, Any]) -> ChatStream:
        """Open a streaming completion. Returns once the upstream has accepted the request
        (so a refusal or an unreachable endpoint is raised here, before anything is sent to
        the caller); iterate the result for the chunks and close it when done."""
        call, opened = self._traced(body, True, lambda: self._stream_once(body))
        opened.traced = call
        return opened

    def _traced(
        self, body: Mapping[str, Any], stream: bool, call: Callable[[], T]
    ) -> tuple[telemetry.ChatCall | telemetry.Untraced, T]:
        """`call` with its retries, in the call's span (which fails with it), and the span, for
        the caller to end when the answer is whole."""
        span = telemetry.chat_call(body, self.base_url, stream=stream, provider=self.api.provider)
        try:
            return span, self._with_retries(call)
        except BaseException as exc:
            span.failed(exc)
            raise

    def models(self) -> list[dict[str, Any]] | None:
        """The upstream's models (`GET {base_url}/models`: its `data`, each entry as the
        upstream sent it), or None when the upstream has no such route (404, 405, 501)."""
        return self._with_retries(self._models_once)

    def _models_once(self) -> list[dict[str, Any]] | None:
        started = time.perf_counter()
        with self._failures(started):
            response = self._http.get("/models")
            if response.status_code in NO_MODEL_LIST:
                self._observe("ok", _since(started))
                return None
            _raise_for_status(response)
            data = _json(response)
            if not isinstance(data, dict) or not isinstance(data.get("data"), list):
                raise UpstreamError("the upstream's model list has no `data` list")
        self._observe("ok", _since(started))
        return [entry for entry in data["data"] if isinstance(entry, dict) and entry.get("id")]

    def _complete_once(self, body: Mapping[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        with self._failures(started):
            response = self._http.post(self.api.path, json=dict(body, stream=False))
            _raise_for_status(response)
            data = _json(response)
            wanted = self.api.answer_list
            if not isinstance(data, dict) or not isinstance(data.get(wanted), list):
                raise UpstreamError(f"the upstream's answer has no `{wanted}` list")
        self._observe("ok", time.perf_counter() - started)
        return data

    def _stream_once(self, body: Mapping[str, Any]) -> ChatStream:
        started = time.perf_counter()
        request = self._http.build_request("POST", self.api.path, json=dict(body, stream=True))
        with self._failures(started):
            response = self._http.send(request, stream=True)
            if response.status_code >= 400:
                response.read()
                response.close()
                _raise_for_status(response)
        return ChatStream(response, lambda outcome: self._observe(outcome, _since(started)))

    @contextmanager
    def _failures(self, started: float) -> Iterator[None]:
        try:
            yield
        except httpx.TimeoutException as exc:
            self._observe("timeout", _since(started))
            raise UpstreamTimeout(f"the upstream model did not answer in time ({exc})") from None
        except httpx.HTTPError as exc:
            self._observe("unreachable", _since(started))
            raise UpstreamError(
                f"cannot reach the upstream model at {self.base_url}: {exc}",
                unreachable=isinstance(exc, httpx.ConnectError),
            ) from None
        except UpstreamError as exc:
            self._observe(f"status_{exc.status}" if exc.status else "bad_response", _since(started))
            raise


def _since(started: float) -> float:
    return time.perf_counter() - started


def _json(response: httpx.Response) -> Any:
    """The body of an answer, which must be JSON (`UpstreamError` if it is not)."""
    try:
        return response.json()
    except ValueError:
        raise UpstreamError("the upstream answered with a body that is not JSON") from None


def _raise_for_status(response: httpx.Response) -> None:
    """An error status becomes `UpstreamError`, carrying the upstream's own message."""
    if response.status_code < 400:
        return
    detail = response.text[:500]
    try:
        error = response.json().get("error")
        if isinstance(error, dict) and error.get("message"):
            detail = str(error["message"])
        elif isinstance(error, str):
            detail = error
    except (ValueError, AttributeError):
        pass
    raise UpstreamError(
        f"the upstream model answered {response.status_code}: {detail}",
        status=response.status_code,
        retry_after=response.headers.get("retry-after"),
    )


class ChatStream:
    """An accepted streaming completion: iterating yields each chunk as the upstream sent it
    (a JSON object per `data:` event, up to `[DONE]`). Closing releases the connection; a
    failure part-way raises `UpstreamError` / `UpstreamTimeout` from the iteration."""

    def __init__(self, response: httpx.Response, done: Callable[[str], None]) -> None:
        self._response = response
        self._done = done
        self.traced: telemetry.ChatCall | telemetry.Untraced = telemetry.UNTRACED
        """The call's span, told each chunk and ended with the stream."""

    def __iter__(self) -> Iterator[dict[str, Any]]:
        outcome = "bad_response"
        try:
            for line in self._response.iter_lines():
                if not line.startswith("data:"):
                    continue  # comments, `event:` lines and blank separators
                payload = line.removeprefix("data:").strip()
                if payload == "[DONE]":
                    break
                try:
                    chunk = json.loads(payload)
                except ValueError:
                    raise UpstreamError("the upstream sent an event that is not JSON") from None
                if isinstance(chunk, dict) and "error" in chunk and "choices" not in chunk:
                    raise UpstreamError(f"the upstream failed while streaming: {chunk['error']}")
                self.traced.chunk(chunk)
                yield chunk
            outcome = "ok"
        except httpx.TimeoutException:
            outcome = "timeout"
            failure: BaseException = UpstreamTimeout(
                "the upstream model stopped answering mid-stream"
            )
            self.traced.failed(failure)
            raise failure from None
        except httpx.HTTPError as exc:
            outcome = "unreachable"
            failure = UpstreamError(f"the upstream connection broke mid-stream: {exc}")
            self.traced.failed(failure)
            raise failure from None
        except GeneratorExit:  # the reader stopped early: not the upstream's failure
            raise
        except BaseException as exc:
            self.traced.failed(exc)
            raise
        finally:
            self.close()
            self._done(outcome)

    def close(self) -> None:
        self._response.close()
        self.traced.end()


@dataclass
class Reply:
    """What a completion said, gathered from a whole answer or from stream chunks."""

    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None
    model: str | None = None

    def gathered(self) -> Reply:
        """The reply the chunks added so far make (a `Reply` gathers itself; see
        `turnkeeper.turns.Wire`)."""
        return self

    @classmethod
    def from_completion(cls, data: Mapping[str, Any]) -> Reply:
        """The first choice of a whole (non-streamed) completion."""
        reply = cls(model=data.get("model"), usage=_usage(data.get("usage")))
        choices = data.get("choices") or [{}]
        message = choices[0].get("message") or {}
        reply.content = message.get("content") or ""
        reply.tool_calls = list(message.get("tool_calls") or [])
        reply.finish_reason = choices[0].get("finish_reason")
        return reply

    def add_chunk(self, chunk: Mapping[str, Any]) -> str:
        """Fold one stream chunk in; returns the text it added (for relaying deltas)."""
        self.model = chunk.get("model") or self.model
        self.usage = _usage(chunk.get("usage")) or self.usage
        choices = chunk.get("choices") or []
        if not choices:
            return ""
        self.finish_reason = choices[0].get("finish_reason") or self.finish_reason
        for call in (choices[0].get("delta") or {}).get("tool_calls") or []:
            self._add_tool_call_delta(call)
        text = delta_text(chunk)
        self.content += text
        return text

    def _add_tool_call_delta(self, delta: Mapping[str, Any]) -> None:
        """Streamed tool calls arrive in pieces keyed by `index`; arguments are concatenated."""
        index = int(delta.get("index", len(self.tool_calls)))
        while len(self.tool_calls) <= index:
            self.tool_calls.append(
                {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
            )
        call = self.tool_calls[index]
        call["id"] = delta.get("id") or call["id"]
        function = delta.get("function") or {}
        call["function"]["name"] += function.get("name") or ""
        call["function"]["arguments"] += function.get("arguments") or ""


def delta_text(chunk: Mapping[str, Any]) -> str:
    """The text a stream chunk adds (its first choice's `delta.content`)."""
    choices = chunk.get("choices") or [{}]
    return str((choices[0].get("delta") or {}).get("content") or "")


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, Mapping):
        return None
    prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    details = raw.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return Usage(
        input_tokens=max(prompt, 0),
        output_tokens=max(completion, 0),
        cache_read_input_tokens=max(cached, 0) if isinstance(cached, int) else 0,
    )
