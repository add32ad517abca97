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

    def set(self, key: str, value: bytes) -> None:
        self._call(lambda: self._client.set(key, value, ex=self.ttl))

    def ttl_of(self, key: str) -> int | None:
        """Seconds left on `key` (None if absent or Redis is down); for tests and operators."""
        left = self._call(lambda: self._client.ttl(key))
        return left if isinstance(left, int) and left >= 0 else None

    def close(self) -> None:
        self._client.close()
