"""`turnkeeper export -o PATH` never destroys what PATH is, and says when it could not write.

Real subprocesses, as a user runs the command; the database they export is made in-process.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from tests.cli.conftest import Cli

from .served import run_cli


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'export.db'}"
    made = Cli(url, {"TURNKEEPER_CONFIG": os.devnull})
    made.ok("sessions", "create", "--key", "s1")
    made.ok("add", "s1", "--role", "user", "hello")
    return url


def assert_one_error_line(stderr: bytes, *words: str) -> None:
    text = stderr.decode()
    assert "Traceback" not in text
    lines = text.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), text
    for word in words:
        assert word in lines[0], text


def records(text: str) -> list[str]:
    return [json.loads(line)["type"] for line in text.splitlines()]


def test_dash_writes_the_export_to_stdout_and_no_file(db: str, tmp_path: Path) -> None:
    result = run_cli("export", "-o", "-", "--db", db, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert records(result.stdout.decode()) == ["session", "message"]
    assert not (tmp_path / "-").exists()
    assert "Exported 1 session and 1 message." in result.stderr.decode()  # off stdout


def test_dash_with_json_is_a_usage_error(db: str) -> None:
    result = run_cli("export", "-o", "-", "--json", "--db", db)
    assert result.returncode == 2
    assert_one_error_line(result.stderr, "--json")


def test_a_device_is_written_to_and_its_write_error_reported(db: str) -> None:
    result = run_cli("export", "-o", "/dev/full", "--db", db)
    assert result.returncode == 1
    assert_one_error_line(result.stderr, "output", "/dev/full", "No space left on device")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_full_stdout_is_an_error_not_a_traceback(db: str) -> None:
    with open("/dev/full", "wb") as full:
        result = run_cli("export", "-o", "-", "--db", db, stdout=full)
    assert result.returncode == 1
    assert_one_error_line(result.stderr, "No space left on device")


def test_a_fifo_is_written_through_and_stays_a_fifo(db: str, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()), daemon=True)
    reader.start()
    result = run_cli("export", "-o", str(fifo), "--db", db)
    reader.join(timeout=30)
    assert result.returncode == 0, result.stderr
    assert records(received[0]) == ["session", "message"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_symlink_stays_a_link_and_its_target_gets_the_export(db: str, tmp_path: Path) -> None:
    target = tmp_path / "real.jsonl"
    target.write_text("old\n")
    target.chmod(0o640)
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    result = run_cli("export", "-o", str(link), "--db", db)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and link.resolve() == target
    assert records(target.read_text()) == ["session", "message"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "export.db", "link.jsonl", "real.jsonl"
    ]  # fmt: skip


def test_a_regular_file_is_replaced_whole(db: str, tmp_path: Path) -> None:
    file = tmp_path / "out.jsonl"
    file.write_text("old\n")
    result = run_cli("export", "-o", str(file), "--db", db)
    assert result.returncode == 0, result.stderr
    assert records(file.read_text()) == ["session", "message"]
    assert "Exported 1 session and 1 message" in result.stdout.decode()


def test_a_missing_directory_is_an_error(db: str, tmp_path: Path) -> None:
    result = run_cli("export", "-o", str(tmp_path / "nowhere" / "x.jsonl"), "--db", db)
    assert result.returncode == 1
    assert_one_error_line(result.stderr, "output", "No such file or directory")
    assert not (tmp_path / "nowhere").exists()
