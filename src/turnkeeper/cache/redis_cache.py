"""The shared cache: Redis, with short timeouts and a bypass when it is down or slow.

Redis is never needed for correctness (the store is the source of truth), so every failure is
swallowed here: the call counts as a bypass (`turnkeeper_cache_bypass_total`) and the caller
reads the store. One warning is logged when an outage starts and one info line when Redis
answers again, not one per request. After a failure Redis is left alone for `retry_after`
seconds, so an outage costs one timeout per interval rather than one per request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from turnkeeper import metrics
from turnkeeper.errors import InvalidConfig
from turnkeeper.logs import get_logger

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise InvalidConfig(
        "redis_url", "the Redis cache needs its client: pip install 'turnkeeper[redis]'"
    ) from exc

T = TypeVar("T")


_SET_UNLESS = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""
"""SET KEYS[1] = ARGV[1] for ARGV[2] ms unless KEYS[2] exists: check and write in one step, so
no replica writes an entry after an erasure set the marker that forbids it."""


class RedisCache:
    """Bytes by key in Redis, each with the cache TTL. Failures return None (a miss)."""

    def __init__(
        self,
        url: str,
        *,
        timeout: timedelta = timedelta(milliseconds=100),
        ttl: timedelta = timedelta(seconds=120),
        retry_after: timedelta = timedelta(seconds=1),
        logger: Any = None,
    ) -> None:
        seconds = timeout.total_seconds()
        self.url = url
        self.ttl = ttl
        self._retry_after = retry_after.total_seconds()
        self._client = redis.Redis.from_url(
            url,
            socket_timeout=seconds,
            socket_connect_timeout=seconds,
            retry=Retry(NoBackoff(), 0),  # no retries: a slow Redis must not slow requests
            health_check_interval=0,
        )
        self._set_unless = self._client.register_script(_SET_UNLESS)
        self._logger = logger or get_logger("turnkeeper.cache")
        self._lock = threading.Lock()
        self._down = False
        self._down_until = 0.0

    @property
    def available(self) -> bool:
        """False during an outage (between a failure and the next successful call)."""
        return not self._down

    def _call(self, operation: Callable[[], T]) -> T | None:
        """`operation()` on the client; None on any failure (see the module)."""
        if self._down and time.monotonic() < self._down_until:
            metrics.CACHE_BYPASS.inc()
            return None
        try:
            result = operation()
        except (redis.RedisError, OSError) as exc:
            metrics.CACHE_BYPASS.inc()
            with self._lock:
                starting = not self._down
                self._down = True
                self._down_until = time.monotonic() + self._retry_after
            if starting:
                self._logger.warning(
                    "redis_cache_unavailable",
                    url=self.url,
                    error=f"{type(exc).__name__}: {exc}",
                    fallback="reading from the store until Redis answers again",
                )
            return None
        if self._down:
            with self._lock:
                ending, self._down = self._down, False
            if ending:
                self._logger.info("redis_cache_restored", url=self.url)
        return result

    def get(self, key: str) -> bytes | None:
        value = self._call(lambda: self._client.get(key))
        return value if isinstance(value, bytes) else None

    def set(self, key: str, value: bytes, *, unless: str | None = None) -> None:
        """Store `value` under `key` for the TTL; with `unless`, only while no key `unless`
        exists, checked in the same call (the marker of an erased session)."""
        if unless is None:
            self._call(lambda: self._client.set(key, value, ex=self.ttl))
            return
        milliseconds = max(int(self.ttl.total_seconds() * 1000), 1)
        self._call(lambda: self._set_unless(keys=[key, unless], args=[value, milliseconds]))

    def forget(
        self, pattern: str, *, marker: str | None = None, marker_ttl: timedelta = timedelta()
    ) -> bool:
        """Set `marker` if given (so no entry it guards is written from now on), then delete
        every key matching `pattern` but the marker. False when Redis could not be reached:
        what it holds then ages out with the TTL."""

        def forget() -> bool:
            if marker is not None:
                self._client.set(marker, b"1", ex=max(marker_ttl, self.ttl))
            kept = None if marker is None else marker.encode()
            doomed = [k for k in self._client.scan_iter(match=pattern, count=1000) if k != kept]
            for start in range(0, len(doomed), 1000):
                self._client.delete(*doomed[start : start + 1000])
            return True

        return self._call(forget) is True

    def ttl_of(self, key: str) -> int | None:
        """Seconds left on `key` (None if absent or Redis is down); for tests and operators."""
        left = self._call(lambda: self._client.ttl(key))
        return left if isinstance(left, int) and left >= 0 else None

    def close(self) -> None:
        self._client.close()
