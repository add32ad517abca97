"""The data a CLI test's command works on, written in this process through the public library
on the test's own database file.

These write the very records `turnkeeper sessions create` and `turnkeeper add` write, without
starting `python -m turnkeeper` for them (about 0.55 s of CPU a start, on a CPU-bound suite).
Seeding is not what those tests test: both commands are tested as real processes elsewhere
(`test_process.py`), and the command a test is about still runs as one.
"""

from __future__ import annotations

import turnkeeper


def create(
    db: str, *, key: str | None = None, project: str | None = None, subject: str | None = None
) -> str:
    """As `turnkeeper sessions create [--key K] [--project P] [--subject S] --db DB`; the new
    session's id."""
    with turnkeeper.open(db) as tk:
        return tk.create_session(key=key, project=project, subject=subject).id


def add(
    db: str,
    session: str,
    text: str,
    *,
    role: str = "user",
    author: str | None = None,
    internal: bool = False,
    project: str | None = None,
) -> str:
    """As `turnkeeper add SESSION TEXT [--role R] [--author A] [--internal] [--project P]
    --db DB`: appended to the session SESSION names (an id or a key), a key that names none
    creating its session as `add` does; that session's id."""
    with turnkeeper.open(db) as tk:
        try:
            target = tk.get_session(session, project=project)
        except turnkeeper.SessionErased:
            raise  # as `add`: an erased id never comes back as a new session's key
        except turnkeeper.SessionNotFound:
            target, _ = tk.get_or_create_session(session, project=project)
        tk.append(target, role, text, author=author, internal=internal)
        return target.id
