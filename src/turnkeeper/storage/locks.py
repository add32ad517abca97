"""Named locks shared by every process on one database: the `exclusive_lock` capability.

`store.exclusive_lock(name)` enters a lock without waiting and yields whether this process (this
connection) now holds it; someone else holding it yields False. It is how replicas sharing a
database agree that only one of them runs a job at a time (the expiry sweeper is the user), so
it must be released when the holder dies, never by a timeout:

- PostgreSQL: a session-level advisory lock, keyed by a stable hash of the name and the
  schema turnkeeper's tables are in, held by one pooled connection for the block (a dead process's connection, and so its lock, goes away);
- SQLite: an exclusive lock on a file beside the database (`<db>.<name>.lock`), which the
  operating system drops with the process. `fcntl` (POSIX) and `msvcrt` (Windows) are imported
  when a lock is taken, never at import time, so turnkeeper imports on every platform; where
  neither exists the lock only excludes holders in the same process, and says so in its name.

The backends keep only one-line methods that delegate here.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO, Any

from turnkeeper.errors import InvalidInput
from turnkeeper.storage.base import LockingStore

_LOCK_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def check_lock_name(name: str) -> str:
    """A lock name becomes part of a file name: letters, digits, `_`, `.`, `-` only."""
    if not _LOCK_NAME.match(name):
        raise InvalidInput("name", f"lock name {name!r} must be 1-64 of A-Z a-z 0-9 _ . -")
    return name


def lock_key(name: str) -> int:
    """The signed 32-bit advisory-lock key of `name`: the same in every process and release (a
    hash of the name, not Python's per-process `hash`)."""
    digest = hashlib.sha256(f"turnkeeper:{check_lock_name(name)}".encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


_TRY_LOCK = "SELECT pg_try_advisory_lock(?, hashtext(current_schema())) AS got"
_UNLOCK = "SELECT pg_advisory_unlock(?, hashtext(current_schema()))"
"""Advisory locks are per database; the second key is the schema's, because a schema is one
turnkeeper database (tables and all) and two of them in one PostgreSQL database are unrelated."""


@contextmanager
def advisory_lock(
    checked_out: Callable[[str, Sequence[Any]], AbstractContextManager[tuple[Any, Any]]],
    name: str,
    *,
    mapped_errors: Callable[[], AbstractContextManager[None]],
) -> Iterator[bool]:
    """A PostgreSQL advisory lock on one pooled connection, kept for the block.
    `checked_out(first, params)` runs the attempt to lock on a connection and yields that
    connection's executor (`?` placeholders) and the attempt's result; `mapped_errors` turns
    driver errors into turnkeeper's (the backend's own mapping)."""
    key = lock_key(name)
    with mapped_errors(), checked_out(_TRY_LOCK, (key,)) as (conn, tried):
        row = tried.fetchone()
        acquired = bool(row and row["got"])
        try:
            yield acquired
        finally:
            if acquired:
                conn.execute(_UNLOCK, (key,))


def lock_file_beside(database: Path, name: str) -> Path:
    """Where the lock `name` of a SQLite database lives: `<database>.<name>.lock`."""
    return database.with_name(f"{database.name}.{check_lock_name(name)}.lock")


@contextmanager
def file_lock(path: Path) -> Iterator[bool]:
    """An exclusive lock on `path`, if free. Released when the block ends or the process dies,
    so a crashed holder never blocks the others."""
    handle = path.open("a+b")
    try:
        try:
            acquired = _try_lock(handle)
        except _Unsupported:
            with in_process_lock(str(path.resolve())) as acquired:
                yield acquired
            return
        try:
            yield acquired
        finally:
            if acquired:
                _unlock(handle)
    finally:
        handle.close()


class _Unsupported(Exception):
    """Neither `fcntl` nor `msvcrt` exists here."""


def _try_lock(handle: IO[bytes]) -> bool:
    try:
        import fcntl
    except ImportError:
        pass
    else:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    try:
        import msvcrt
    except ImportError:
        raise _Unsupported from None
    handle.seek(0)
    try:  # the first byte, whether or not the file has one
        msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined,unused-ignore]
    except OSError:
        return False
    return True


def _unlock(handle: IO[bytes]) -> None:
    try:
        import fcntl
    except ImportError:
        import msvcrt

        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined,unused-ignore]
        return
    fcntl.flock(handle, fcntl.LOCK_UN)


_IN_PROCESS: dict[str, threading.Lock] = {}
_IN_PROCESS_GUARD = threading.Lock()


@contextmanager
def in_process_lock(name: str) -> Iterator[bool]:
    """The fallback: excludes holders of `name` in this process only (a store without locks
    of its own, or a platform without file locks)."""
    with _IN_PROCESS_GUARD:
        lock = _IN_PROCESS.setdefault(name, threading.Lock())
    acquired = lock.acquire(blocking=False)
    try:
        yield acquired
    finally:
        if acquired:
            lock.release()


def exclusive_lock(store: object, name: str) -> AbstractContextManager[bool]:
    """`store`'s database-wide lock `name` if it has the capability, else the in-process
    fallback (a store without it still gets one holder per process)."""
    if isinstance(store, LockingStore):
        return store.exclusive_lock(name)
    return in_process_lock(f"{getattr(store, 'url', id(store))}:{check_lock_name(name)}")
