"""`turnkeeper serve` as a real process: its banner, its log formats and levels, a port that is
taken, and what a plain install without the `server` extra says."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
BANNER = 3
"""Lines of the banner `serve` writes before its logs."""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    values = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("TURNKEEPER_", "OPENAI_", "ANTHROPIC_"))
    }
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), values.get("PYTHONPATH")]))
    return values | {"PYTHONPATH": path, "TURNKEEPER_CONFIG": os.devnull}


@contextmanager
def served(env: dict[str, str], tmp_path: Path, *args: str) -> Iterator[tuple[str, list[str]]]:
    """`turnkeeper serve --no-auth --port 0 ARGS…` running; yields its URL and, once it has
    stopped, the lines it wrote to stderr are in the list."""
    process = subprocess.Popen(
        [sys.executable, "-m", "turnkeeper", "serve", "--no-auth", "--port", "0",
         "--db", f"sqlite:///{tmp_path / 'served.db'}", *args],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, text=True,
    )  # fmt: skip
    lines: list[str] = []
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        lines.append(first.rstrip("\n"))
        match = re.search(r"serving on (http://\S+)", first)
        assert match, first
        url = match.group(1)
        for _ in range(200):
            try:
                httpx.get(f"{url}/healthz")
                break
            except httpx.TransportError:
                time.sleep(0.05)
        yield url, lines
    finally:
        process.terminate()
        process.wait(timeout=20)
        assert process.stderr is not None
        lines.extend(process.stderr.read().splitlines())  # after what `readline` buffered
        process.stderr.close()


def _traffic(url: str) -> None:
    headers = {"X-Request-ID": "trace-42"}
    httpx.post(f"{url}/v1/sessions", json={"key": "k"}, headers=headers)
    httpx.post(
        f"{url}/v1/sessions/k/messages", json={"role": "user", "content": "hi"}, headers=headers
    )
    httpx.get(f"{url}/v1/sessions/k/context", headers=headers)


def test_the_banner_names_the_web_ui_and_the_api_docs(env: dict[str, str], tmp_path: Path) -> None:
    with served(env, tmp_path) as (url, lines):
        assert httpx.get(f"{url}/", follow_redirects=True).status_code == 200
    assert lines[0] == f"turnkeeper is serving on {url}"
    assert lines[1].split() == ["web", "UI:", f"{url}/", "API", "docs:", f"{url}/docs", "stop:",
                                "Ctrl-C"]  # fmt: skip


def test_the_banner_names_the_upstreams_and_where_their_keys_come_from_never_a_key(
    env: dict[str, str], tmp_path: Path
) -> None:
    env |= {"OPENAI_API_KEY": "sk-never-printed", "ANTHROPIC_API_KEY": "sk-ant-never-printed"}
    env |= {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    with served(env, tmp_path) as (_, lines):
        pass
    assert lines[2] == (
        "  models: OpenAI-compatible upstream: http://127.0.0.1:9/v1 (key from OPENAI_API_KEY); "
        "Anthropic upstream: https://api.anthropic.com (key from ANTHROPIC_API_KEY)"
    )
    assert not any("never-printed" in line for line in lines)


def test_the_banner_says_when_no_anthropic_upstream_is_configured(
    env: dict[str, str], tmp_path: Path
) -> None:
    env |= {"TURNKEEPER_LLM_BASE_URL": "http://127.0.0.1:9/v1"}
    with served(env, tmp_path) as (_, lines):
        pass
    assert lines[2] == (
        "  models: OpenAI-compatible upstream: http://127.0.0.1:9/v1 (no key); "
        "Anthropic upstream: not configured (set ANTHROPIC_API_KEY)"
    )


def test_logs_are_json_lines_off_a_terminal(env: dict[str, str], tmp_path: Path) -> None:
    with served(env, tmp_path) as (url, lines):
        _traffic(url)
    records = [json.loads(line) for line in lines[BANNER:]]
    requests = [r["path"] for r in records if r["event"] == "http_request"]
    assert requests[-3:] == ["/v1/sessions", "/v1/sessions/k/messages", "/v1/sessions/k/context"]
    built = next(r for r in records if r["event"] == "conversation_context_loaded")
    assert built["logger"] == "turnkeeper.context" and built["level"] == "info"
    assert built["strategy"] == "sliding_window" and built["request_id"] == "trace-42"
    traced = [r["event"] for r in records if r.get("request_id") == "trace-42"]
    assert traced.count("http_request") == 3
    assert all(r.get("request_id") for r in records if r["event"] == "http_request")


def test_console_logs_are_readable_lines(env: dict[str, str], tmp_path: Path) -> None:
    with served(env, tmp_path, "--log-format", "console") as (url, lines):
        _traffic(url)
    logged = lines[BANNER:]
    assert logged and not any(line.startswith("{") for line in logged)
    built = next(line for line in logged if "conversation_context_loaded" in line)
    assert "[info" in built and "strategy=sliding_window" in built


def test_log_level_hides_lesser_lines_but_every_build_is_still_counted(
    env: dict[str, str], tmp_path: Path
) -> None:
    with served(env, tmp_path, "--log-level", "warning") as (url, lines):
        _traffic(url)
        metrics = httpx.get(f"{url}/metrics").text
        missing = httpx.get(f"{url}/v1/sessions/nope")
    assert missing.status_code == 404
    assert 'turnkeeper_context_builds_total{strategy="sliding_window"} 1.0' in metrics
    assert [json.loads(line)["level"] for line in lines[BANNER:]] in ([], ["warning"])
    assert not any('"info"' in line for line in lines[BANNER:])


def test_a_port_in_use_is_one_line_and_nothing_announced(
    env: dict[str, str], tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "turnkeeper", "serve", "--no-auth", "--port", str(port),
             "--db", f"sqlite:///{tmp_path / 'x.db'}"],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"error: port: {port} on 127.0.0.1 is already in use; choose another with --port"
    ]


def test_on_a_terminal_the_logs_are_console_lines(env: dict[str, str], tmp_path: Path) -> None:
    import pty

    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "turnkeeper", "serve", "--no-auth", "--port", "0",
         "--db", f"sqlite:///{tmp_path / 'tty.db'}"],
        stderr=follower, stdout=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    os.close(follower)
    output = b""
    try:
        while b"/docs" not in output:
            output += os.read(leader, 4096)
        url = re.search(rb"serving on (http://\S+)", output)
        assert url, output
        _traffic(url.group(1).decode())
    finally:
        process.terminate()
        process.wait(timeout=20)
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        output += chunk
    os.close(leader)
    lines = [line for line in output.decode().splitlines() if "http_request" in line]
    assert len(lines) == 3
    assert not any(line.lstrip().startswith("{") for line in lines)


def test_workers_share_the_port_and_only_one_of_them_sweeps(
    env: dict[str, str], tmp_path: Path
) -> None:
    env = env | {"TURNKEEPER_CLEANUP_INTERVAL": "0.2s"}
    with served(env, tmp_path, "--workers", "3") as (url, lines):
        _ready(url)
        time.sleep(2)  # every worker has started, and the sweeper has run several times
        # many at once, a new connection each: while one worker is busy, another accepts
        with ThreadPoolExecutor(10) as pool:
            answers = list(
                pool.map(
                    lambda n: httpx.post(f"{url}/v1/sessions", json={"key": f"k{n}"}), range(60)
                )
            )
        assert {answer.status_code for answer in answers} == {201}
    assert lines[0] == f"turnkeeper is serving on {url} (3 workers)"
    records = [json.loads(line) for line in lines[BANNER:] if line.startswith("{")]
    serving = {r["pid"] for r in records if r["event"] == "http_request"}
    sweeping = [r["pid"] for r in records if r["event"] == "expiry_sweep"]
    assert len(serving) >= 2  # the requests were answered by more than one process
    assert len(sweeping) >= 3 and len(set(sweeping)) == 1  # swept often, by one worker only


def test_a_stopped_service_leaves_no_worker_behind(env: dict[str, str], tmp_path: Path) -> None:
    with served(env, tmp_path, "--workers", "2") as (url, lines):
        _ready(url)
        processes = _serving(tmp_path / "served.db")
        workers = [p for p in processes if p.ppid() in {q.pid for q in processes}]
        assert len(processes) == 3 and len(workers) == 2  # the supervisor and its workers
    for worker in workers:
        worker.wait(timeout=10)  # raises if it outlives the supervisor
    assert not any("Traceback" in line for line in lines)


def test_workers_stop_when_their_supervisor_is_killed(env: dict[str, str], tmp_path: Path) -> None:
    with served(env, tmp_path, "--workers", "2") as (url, _):
        _ready(url)
        processes = _serving(tmp_path / "served.db")
        pids = {p.pid for p in processes}
        (supervisor,) = [p for p in processes if p.ppid() not in pids]
        workers = [p for p in processes if p is not supervisor]
        supervisor.kill()  # SIGKILL: no chance to stop the workers itself
        for worker in workers:
            worker.wait(timeout=10)  # the kernel told them (raises if one goes on serving)
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{url}/healthz", timeout=2)


def test_a_restarted_worker_serves_its_copy_of_the_app_built_before_the_fork(
    env: dict[str, str], tmp_path: Path
) -> None:
    """The supervisor builds the workers' apps before forking; a worker that dies is forked
    again from the supervisor's untouched copy, and serves (worker 0 sweeps again)."""
    env = env | {"TURNKEEPER_CLEANUP_INTERVAL": "0.2s"}
    with served(env, tmp_path, "--workers", "2") as (url, lines):
        _ready(url)
        processes = _serving(tmp_path / "served.db")
        pids = {p.pid for p in processes}
        (supervisor,) = [p for p in processes if p.ppid() not in pids]
        first = {p.pid for p in processes if p is not supervisor}
        for worker in [p for p in processes if p is not supervisor]:
            worker.kill()
            worker.wait(timeout=10)
        deadline = time.monotonic() + 60
        while len({c.pid for c in supervisor.children()} - first) < 2:
            assert time.monotonic() < deadline, "the workers were not restarted"
            time.sleep(0.1)
        restarted = {c.pid for c in supervisor.children()} - first
        _ready(url)
        answers = [httpx.post(f"{url}/v1/sessions", json={"key": f"k{n}"}) for n in range(20)]
        assert {answer.status_code for answer in answers} == {201}
        time.sleep(1)  # the restarted worker 0 sweeps several times
    records = [json.loads(line) for line in lines[BANNER:] if line.startswith("{")]
    created = [r for r in records if r["event"] == "http_request" and r["method"] == "POST"]
    assert len(created) == 20 and {r["pid"] for r in created} <= restarted
    assert {r["pid"] for r in records if r["event"] == "expiry_sweep"} & restarted
    assert not any("Traceback" in line for line in lines)


def test_a_worker_killed_again_and_again_is_replaced_while_the_service_answers(
    env: dict[str, str], tmp_path: Path
) -> None:
    """kill -9 of one worker, then of each replacement as soon as it appears (before it can
    even serve): the other worker answers throughout, each killed worker is replaced, and
    each death is logged with the dead worker's pid."""
    with served(env, tmp_path, "--workers", "2") as (url, lines):
        _ready(url)
        processes = _serving(tmp_path / "served.db")
        pids = {p.pid for p in processes}
        (supervisor,) = [p for p in processes if p.ppid() not in pids]
        healthy, victim = [p for p in processes if p is not supervisor]
        killed = []
        for _ in range(4):
            victim.kill()
            victim.wait(timeout=10)
            killed.append(victim.pid)
            answer = httpx.post(f"{url}/v1/sessions", json={})  # the healthy worker answers
            assert answer.status_code == 201
            victim = _new_child(supervisor, known={healthy.pid, *killed})
        assert supervisor.is_running()
        # the healthy one goes too: what answers now can only be a replacement
        healthy.kill()
        healthy.wait(timeout=10)
        _ready(url)
        answers = [httpx.post(f"{url}/v1/sessions", json={}) for _ in range(5)]
        assert {answer.status_code for answer in answers} == {201}
        successor = _new_child(supervisor, known={healthy.pid, victim.pid, *killed})
        replacements = {c.pid for c in supervisor.children()}
        assert replacements == {victim.pid, successor.pid}
    records = [json.loads(line) for line in lines[BANNER:] if line.startswith("{")]
    stopped = [r for r in records if r["event"] == "worker_stopped"]
    assert [r["worker_pid"] for r in stopped] == [*killed, healthy.pid]
    assert {r["pid"] for r in stopped} == {supervisor.pid}  # the line's writer
    assert {r["signal"] for r in stopped} == {"SIGKILL"}
    assert not [r for r in records if r["event"] == "workers_cannot_start"]
    created = [r for r in records if r["event"] == "http_request" and r["method"] == "POST"]
    assert {r["pid"] for r in created[-5:]} <= replacements  # none of them was killed


def test_workers_that_cannot_start_stop_the_service_with_an_error(
    env: dict[str, str], tmp_path: Path
) -> None:
    """Every worker dies before it serves (its database's directory is missing): after a few
    tries each, the supervisor gives up, and `serve` exits 1 instead of forking forever."""
    from turnkeeper.server.run import FAILED_STARTS

    result = subprocess.run(
        [sys.executable, "-m", "turnkeeper", "serve", "--no-auth", "--port", "0",
         "--workers", "2", "--db", f"sqlite:///{tmp_path / 'missing' / 'x.db'}"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1
    records = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    stopped = [r for r in records if r["event"] == "worker_stopped"]
    assert stopped and not any(r["served"] for r in stopped)
    assert max(Counter(r["worker"] for r in stopped).values()) == FAILED_STARTS
    assert [r["event"] for r in records].count("workers_cannot_start") == 1
    assert "SystemExit" not in result.stderr


def _new_child(supervisor: Any, known: set[int]) -> Any:
    """The supervisor's next child not in `known` (the replacement of a killed worker)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        fresh = [c for c in supervisor.children() if c.pid not in known]
        if fresh:
            return fresh[0]
        time.sleep(0.01)
    raise AssertionError("the killed worker was not replaced")


def _serving(database: Path) -> list[Any]:
    """The processes of the `turnkeeper serve` on `database` (forked workers share its
    command line)."""
    import psutil

    found = []
    for process in psutil.process_iter(["cmdline"]):
        if str(database) in " ".join(process.info["cmdline"] or []):
            found.append(process)
    return found


def _ready(url: str) -> None:
    """Wait until the service answers (workers start slowly on a busy machine)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} did not come up")
