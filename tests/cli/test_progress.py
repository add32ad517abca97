"""Progress bars on a real terminal (stderr on a pseudo-terminal): totals where knowable."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import turnkeeper
from tests.cli.test_process import env, run

__all__ = ["env"]  # the fixture, re-used

SESSIONS = 25  # over the threshold (20) from which bars are shown


def on_terminal(env: dict[str, str], *args: str) -> tuple[int, str]:
    """Run the CLI with stderr on a pseudo-terminal; its exit code and what the terminal got."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "turnkeeper", *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=follower,
        env={**env, "TERM": "xterm", "COLUMNS": "100"},
    )  # fmt: skip
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    return process.wait(timeout=60), shown.decode(errors="replace")


def _sessions(db: str, ttl: timedelta | None) -> None:
    with turnkeeper.open(db) as tk:
        for n in range(SESSIONS):
            session = tk.create_session(key=f"s{n}", ttl=ttl)
            if ttl is None:
                tk.append(session, "user", f"hello {n}")


def test_import_shows_its_total(env: dict[str, str], tmp_path: Path) -> None:
    source, target = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    _sessions(source, None)
    dump = tmp_path / "all.jsonl"
    assert run(env, "export", "-o", str(dump), "--db", source).returncode == 0
    code, shown = on_terminal(env, "import", str(dump), "--db", target)
    assert code == 0
    assert f"/{SESSIONS}" in shown and "/?" not in shown, shown


def test_gc_delete_shows_its_total(env: dict[str, str], tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'a.db'}"
    _sessions(db, timedelta(microseconds=1))
    code, shown = on_terminal(env, "gc", "--delete", "--grace", "0s", "--db", db)
    assert code == 0
    assert f"/{SESSIONS}" in shown and "/?" not in shown, shown
