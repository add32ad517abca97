"""turnkeeper as a library is quiet: it logs through standard `logging` and prints nothing.

The program below uses the library the way an application does, including paths that log
warnings (an unreachable Redis cache, a failing LLM summarizer), in a fresh interpreter so no
test configuration leaks in. Run as is, it must leave stdout and stderr empty; run with
logging configured by its host, the same events must appear there.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

from turnkeeper.logs import LogEvent, capture_events, get_logger

PROGRAM = textwrap.dedent(
    """
    import logging, sys
    if sys.argv[2] == "show":
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(message)s")
    import turnkeeper

    with turnkeeper.open(
        f"sqlite:///{sys.argv[1]}",
        redis_url=f"redis://127.0.0.1:{sys.argv[3]}/0",
        summary_model="summarizer",
        llm_base_url=f"http://127.0.0.1:{sys.argv[3]}/v1",
    ) as tk:
        session, _ = tk.get_or_create_session("quiet")
        tk.append(session, "system", "You are terse.")
        for i in range(30):
            tk.append(session, "user", f"question {i} " + "words " * 20)
            tk.append(session, "assistant", f"answer {i}")
        for strategy in ("full", "recent", "sliding_window", "truncate", "summarize"):
            budget = None if strategy == "full" else 600
            window = tk.context(session, strategy=strategy, budget_tokens=budget, reserved_tokens=0)
            turnkeeper.to_openai(window)
        tk.conversation_context("quiet")
    """
)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(tmp_path: Path, mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, str(tmp_path / f"{mode}.db"), mode, str(_closed_port())],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "TURNKEEPER_CONFIG": "/dev/null"},
    )


def test_using_the_library_writes_nothing_to_stdout_or_stderr(tmp_path: Path) -> None:
    run = _run(tmp_path, "quiet")
    assert run.returncode == 0, run.stderr
    assert (run.stdout, run.stderr) == ("", "")


def test_the_host_application_decides_where_the_events_go(tmp_path: Path) -> None:
    run = _run(tmp_path, "show")
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""
    lines = run.stderr.splitlines()
    built = [
        line for line in lines if line.startswith("turnkeeper.context conversation_context_loaded")
    ]
    assert len(built) == 5
    assert "strategy='summarize'" in built[-1]
    assert any(line.startswith("turnkeeper.cache redis_cache_unavailable") for line in lines)
    assert any(line.startswith("turnkeeper.context summary_failed") for line in lines)
    assert any(line.startswith("turnkeeper.service summary_failed") for line in lines)


def test_an_event_renders_as_its_name_and_fields() -> None:
    event = LogEvent("sessions_archived", {"path": "/tmp/a.jsonl", "sessions": 2})
    assert str(event) == "sessions_archived path='/tmp/a.jsonl' sessions=2"


def test_captured_events_leave_logging_as_it_was() -> None:
    root = logging.getLogger("turnkeeper")
    before = (list(root.handlers), root.level, root.propagate)
    with capture_events() as events:
        get_logger("turnkeeper.test").warning("something_odd", detail=1)
        get_logger("turnkeeper.test").debug("chatter")
    assert events == [
        {"event": "something_odd", "log_level": "warning", "detail": 1},
        {"event": "chatter", "log_level": "debug"},
    ]
    assert (list(root.handlers), root.level, root.propagate) == before
    assert any(isinstance(handler, logging.NullHandler) for handler in root.handlers)
