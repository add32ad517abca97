"""Every cache key turnkeeper uses, in one place.

A key names the database (`namespace`: a digest of the store's URL, so stores sharing one Redis
never see each other's entries), the session, and the session's `version`. Every write to a
session bumps its version, so an entry made before a write can never be found after it: there
is nothing to invalidate, and stale entries simply age out (TTL in Redis, LRU in process).

    tk:<namespace>:<session_id>:<version>:<what>

An erased session (`ErasureStore`) leaves a marker, `tk:<namespace>:<session_id>:erased`, for
as long as any entry of it could still be written by a replica that read it before: a write of
an entry checks the marker in the same Redis call (`RedisCache.set`'s `unless`).
"""

from __future__ import annotations

import hashlib
import re

from turnkeeper.types import MessageQuery

PREFIX = "tk"


def _bound(value: int | None) -> str:
    """An optional number in a key: "-" for None, so that "no bound" never shares a key with
    a bound of 0 (a pager asking for `to_seq=0` must not get the unbounded page back)."""
    return "-" if value is None else str(value)


def namespace(store_url: str) -> str:
    """A short, stable name for one database (the URL carries host, database and schema)."""
    return hashlib.sha256(store_url.encode()).hexdigest()[:16]


def messages(ns: str, session_id: str, version: int, query: MessageQuery) -> str:
    """A page of messages (`read_messages` with this query)."""
    what = (
        f"msgs:{_bound(query.from_seq)}:{_bound(query.to_seq)}:{int(query.include_internal)}"
        f":{int(query.newest_first)}:{_bound(query.limit)}"
    )
    return f"{PREFIX}:{ns}:{session_id}:{version}:{what}"


def count(
    ns: str, session_id: str, version: int, *, before_seq: int | None, include_internal: bool
) -> str:
    """A message count (`count_messages`)."""
    return (
        f"{PREFIX}:{ns}:{session_id}:{version}:count:{_bound(before_seq)}:{int(include_internal)}"
    )


def stats(ns: str, session_id: str, version: int) -> str:
    """Per-session statistics (`session_stats`)."""
    return f"{PREFIX}:{ns}:{session_id}:{version}:stats"


def summary(ns: str, session_id: str, version: int, *, upto_seq: int | None) -> str:
    """The latest summary checkpoint covering at most `upto_seq` (`latest_summary`)."""
    return f"{PREFIX}:{ns}:{session_id}:{version}:summary:{_bound(upto_seq)}"


def erased(ns: str, session_id: str) -> str:
    """The marker of an erased session: no entry of it may be written while it stands."""
    return f"{PREFIX}:{ns}:{session_id}:erased"


_GLOB = re.compile(r"([*?\[\]\\])")


def of_session(ns: str, session_id: str) -> str:
    """A Redis `SCAN MATCH` pattern for every key of the session (its id's glob characters
    escaped, so an imported id holding `*` matches itself only)."""
    escaped = _GLOB.sub(r"\\\1", session_id)
    return f"{PREFIX}:{ns}:{escaped}:*"
