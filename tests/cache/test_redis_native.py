"""The Redis cache under the native async face: commands go through the loop's
`redis.asyncio` client, and Redis going away mid-run is a bypass (reads from PostgreSQL),
never an error, until it answers again."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from tests.cache.conftest import RedisServer
from tests.cache.test_cached_store import metric, redis_hits
from tests.conftest import Clock, run_async
from turnkeeper.cache import CachedStore
from turnkeeper.cache.redis_cache import RedisCache
from turnkeeper.config import Settings
from turnkeeper.service import Turnkeeper
from turnkeeper.service.aio import AsyncTurnkeeper, Bridge
from turnkeeper.storage.postgres import PostgresStore


def test_redis_stopped_under_the_native_face_is_bypassed_and_used_again_after_restart(
    private_redis: RedisServer, postgres_url: str, settings: Settings, clock: Clock
) -> None:
    cache = RedisCache(private_redis.url, retry_after=timedelta(milliseconds=200))
    store = CachedStore(PostgresStore(postgres_url, max_size=4), redis=cache)
    # No in-process layer (LRU, remembered windows): every warm read must reach Redis.
    settings = settings.model_copy(update={"lru_size": 0})
    face = AsyncTurnkeeper(Turnkeeper(store, settings, clock=clock))
    assert isinstance(face._workers, Bridge)

    async def newest(session_id: str) -> str:
        window = await face.context(session_id, strategy="sliding_window", budget_tokens=4000)
        return window.messages[-1].content

    async def run() -> dict[str, object]:
        seen: dict[str, object] = {}
        session = await face.create_session()
        await face.append(session, "user", "before the outage")
        await newest(session.id)
        before = redis_hits()
        seen["warm"] = await newest(session.id)
        seen["hit through the loop's client"] = redis_hits() > before and (
            asyncio.get_running_loop() in cache._async_clients
        )
        seen["blocking client unused"] = cache._client.connection_pool._created_connections

        private_redis.stop()
        bypasses = metric("turnkeeper_cache_bypass_total")
        during = []
        for i in range(3):
            await face.append(session, "user", f"during the outage {i}")
            during.append(await newest(session.id))
            await asyncio.sleep(0.25)  # outlast retry_after: each retry meets the outage
        seen["during"] = during
        seen["bypassed"] = metric("turnkeeper_cache_bypass_total") - bypasses
        seen["down"] = not cache.available

        private_redis.start()
        await asyncio.sleep(0.3)
        await face.append(session, "user", "after the restart")
        await newest(session.id)
        before = redis_hits()
        seen["after"] = await newest(session.id)
        seen["hits again"] = redis_hits() > before and cache.available
        await face.close()
        return seen

    seen = run_async(run())
    assert seen["warm"] == "before the outage"
    assert seen["hit through the loop's client"] is True
    assert seen["blocking client unused"] == 0
    assert seen["during"] == [f"during the outage {i}" for i in range(3)]
    assert isinstance(seen["bypassed"], float) and seen["bypassed"] >= 3
    assert seen["down"] is True
    assert seen["after"] == "after the restart"
    assert seen["hits again"] is True
