"""Every metric turnkeeper records, by name, and the one way the core records them.

The core (caches, expiry, context building, the service, chat turns, the model client) says
what happened through the instruments declared here — `metrics.CACHE_HITS.labels("lru").inc()`
— and nothing else: no module below the edge touches a metrics library. An instrument passes
each event to the installed `Recorder`s; `turnkeeper.prometheus` is the one turnkeeper ships
(it keeps the `prometheus_client` counters and histograms `/metrics` serves, under these
names), installed by the package at import when prometheus-client is there (the `server`
extra). Without a recorder an event costs a loop over an empty list, so the library never needs
prometheus-client to work. Another backend (StatsD, OpenTelemetry, a test) installs its own.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from turnkeeper.types import Message, Session

Kind = Literal["counter", "histogram"]


class Recorder(Protocol):
    """Receives every event: `instrument`'s value `amount` (a count to add, or an observed
    value for a histogram) with its label values in the declared order."""

    def record(self, instrument: Instrument, labels: tuple[str, ...], amount: float) -> None: ...


_recorders: list[Recorder] = []
_installing = threading.Lock()


def install(recorder: Recorder) -> None:
    """Send every event from now on to `recorder` too (installing one twice has no effect)."""
    with _installing:
        if recorder not in _recorders:
            _recorders.append(recorder)


def uninstall(recorder: Recorder) -> None:
    with _installing:
        if recorder in _recorders:
            _recorders.remove(recorder)


@dataclass(frozen=True)
class Instrument:
    """One named metric: its kind, help text, label names (and histogram buckets)."""

    name: str
    help: str
    label_names: tuple[str, ...] = ()
    kind: Kind = "counter"
    buckets: tuple[float, ...] | None = None
    _labelled: dict[tuple[str, ...], _Bound] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def labels(self, *values: str) -> _Bound:
        if len(values) != len(self.label_names):
            raise ValueError(f"{self.name} takes labels {self.label_names}, got {values}")
        bound = self._labelled.get(values)
        if bound is None:
            bound = self._labelled.setdefault(values, _Bound(self, values))
        return bound

    def inc(self, amount: float = 1) -> None:
        _Bound(self, ()).inc(amount)

    def observe(self, value: float) -> None:
        _Bound(self, ()).observe(value)


@dataclass(frozen=True)
class _Bound:
    instrument: Instrument
    values: tuple[str, ...]

    def inc(self, amount: float = 1) -> None:
        for recorder in _recorders:
            recorder.record(self.instrument, self.values, amount)

    def observe(self, value: float) -> None:
        self.inc(value)


def Counter(name: str, help: str, label_names: Sequence[str] = ()) -> Instrument:
    return Instrument(name, help, tuple(label_names))


def Histogram(
    name: str, help: str, label_names: Sequence[str] = (), *, buckets: Sequence[float] | None = None
) -> Instrument:
    return Instrument(
        name, help, tuple(label_names), "histogram", None if buckets is None else tuple(buckets)
    )


CACHE_HITS = Counter("turnkeeper_cache_hits_total", "Cached reads served from a cache.", ["layer"])
"""`layer` is `lru` (in process) or `redis` (shared)."""

CACHE_MISSES = Counter(
    "turnkeeper_cache_misses_total", "Cacheable reads no cache could serve (read from the store)."
)

CACHE_BYPASS = Counter(
    "turnkeeper_cache_bypass_total",
    "Redis calls skipped or failed because Redis was down or slow (served from the store).",
)

SESSIONS_EXPIRED = Counter(
    "turnkeeper_sessions_expired_total", "Sessions marked expired by expire()/gc/the sweeper."
)

SESSIONS_ARCHIVED = Counter(
    "turnkeeper_sessions_archived_total",
    "Sessions (expired, or past their retention) written to the JSONL archive.",
)

SESSIONS_DELETED = Counter(
    "turnkeeper_sessions_deleted_total", "Expired sessions deleted after the grace period."
)

SESSIONS_RETAINED_OUT = Counter(
    "turnkeeper_sessions_retention_deleted_total",
    "Sessions deleted whole because they outlived their project's retention.",
)

MESSAGES_RETAINED_OUT = Counter(
    "turnkeeper_messages_retention_deleted_total",
    "Messages deleted from sessions that live on because they outlived their project's retention.",
)

SESSIONS_HELD = Counter(
    "turnkeeper_sessions_held_total",
    "Sessions past their retention (or expiry grace) that a legal hold kept, counted per run.",
)

SWEEPS = Counter(
    "turnkeeper_sweeps_total",
    "Expiry sweeper runs, by outcome: ran, skipped (another sweeper held the lock), failed.",
    ["outcome"],
)

# -- the HTTP service (turnkeeper.server) ----------------------------------------------------

HTTP_REQUESTS = Counter(
    "turnkeeper_http_requests_total",
    "HTTP requests answered, by method, route template and status code.",
    ["method", "route", "status"],
)

HTTP_LATENCY = Histogram(
    "turnkeeper_http_request_duration_seconds",
    "Time to answer an HTTP request (to the last byte of a streamed answer), by route.",
    ["method", "route"],
)

SESSIONS_CREATED = Counter("turnkeeper_sessions_created_total", "Sessions created.")

MESSAGES_APPENDED = Counter(
    "turnkeeper_messages_appended_total",
    "Messages newly stored (retries excluded), by role.",
    ["role"],
)

TOKENS_STORED = Counter(
    "turnkeeper_tokens_stored_total", "Tokens of newly stored messages, counted at write time."
)

CONTEXT_BUILDS = Counter(
    "turnkeeper_context_builds_total", "Context windows built, by strategy.", ["strategy"]
)

CONTEXT_TRUNCATIONS = Counter(
    "turnkeeper_context_truncations_total",
    "Context builds that left out or summarized stored messages, by strategy.",
    ["strategy"],
)

UPSTREAM_LATENCY = Histogram(
    "turnkeeper_upstream_duration_seconds",
    "Time the upstream model took (to the end of a streamed answer), by outcome.",
    ["outcome"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)

UPSTREAM_ERRORS = Counter(
    "turnkeeper_upstream_errors_total",
    "Failed upstream model calls, by kind: timeout, unreachable, status_<code>, bad_response.",
    ["kind"],
)

UPSTREAM_CACHE_READ_TOKENS = Counter(
    "turnkeeper_upstream_cache_read_tokens_total",
    "Input tokens the upstream model served from its prompt cache, as stored replies report.",
)

UPSTREAM_CACHE_CREATION_TOKENS = Counter(
    "turnkeeper_upstream_cache_creation_tokens_total",
    "Input tokens the upstream model wrote to its prompt cache, as stored replies report.",
)

# -- summaries ----------------------------------------------------------------------------------

SUMMARY_FAILURES = Counter(
    "turnkeeper_summary_failures_total",
    "Summaries that failed (the build fell back to the sliding-window result).",
)

SUMMARY_CHECKPOINTS = Counter(
    "turnkeeper_summary_checkpoints_total", "Summary checkpoints built and stored."
)


INSTRUMENTS: tuple[Instrument, ...] = tuple(
    value for value in list(globals().values()) if isinstance(value, Instrument)
)
"""Every instrument above (what a recorder declares up front)."""


def stored(session: Session, created: bool, messages: Sequence[Message]) -> None:
    """Count a write: a session created, and the messages newly stored (retries are not)."""
    if created:
        SESSIONS_CREATED.inc()
    for message in messages:
        MESSAGES_APPENDED.labels(message.role.value).inc()
        TOKENS_STORED.inc(message.tokens)
        if message.usage is not None:
            UPSTREAM_CACHE_READ_TOKENS.inc(message.usage.cache_read_input_tokens)
            UPSTREAM_CACHE_CREATION_TOKENS.inc(message.usage.cache_creation_input_tokens)


def upstream(outcome: str, seconds: float) -> None:
    """Count an upstream model call: latency by outcome, and errors by kind."""
    UPSTREAM_LATENCY.labels(outcome).observe(seconds)
    if outcome != "ok":
        UPSTREAM_ERRORS.labels(outcome).inc()
