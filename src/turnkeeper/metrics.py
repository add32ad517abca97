"""Every Prometheus metric turnkeeper records, by name, in one flat module.

Defined once at import (prometheus-client registers each name once per process) and incremented
where the event happens. prometheus-client comes with the `server` extra; without it the metrics
are no-ops, so the library never needs it to work.
"""

from __future__ import annotations

from typing import Any

try:
    from prometheus_client import Counter, Histogram
except ImportError:  # pragma: no cover - depends on the installed extras

    class Counter:  # type: ignore[no-redef]
        """Stands in for `prometheus_client.Counter` when it is not installed."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def labels(self, *args: Any, **kwargs: Any) -> Any:
            return self

        def inc(self, amount: float = 1) -> None:
            pass

    class Histogram(Counter):  # type: ignore[no-redef]
        """Stands in for `prometheus_client.Histogram` when it is not installed."""

        def observe(self, amount: float) -> None:
            pass


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
    "turnkeeper_sessions_archived_total", "Expired sessions written to the JSONL archive."
)

SESSIONS_DELETED = Counter(
    "turnkeeper_sessions_deleted_total", "Expired sessions deleted after the grace period."
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

# -- summaries ----------------------------------------------------------------------------------

SUMMARY_FAILURES = Counter(
    "turnkeeper_summary_failures_total",
    "Summaries that failed (the build fell back to the sliding-window result).",
)

SUMMARY_CHECKPOINTS = Counter(
    "turnkeeper_summary_checkpoints_total", "Summary checkpoints built and stored."
)
