"""Hostile input to the CLI, through real subprocesses: every case ends with one `error:` line
on stderr and a non-zero exit, never a traceback, and nothing stored changes.

What is under test runs as a real process; the database around it is made and read back by the
same commands run in-process (`tests.cli.conftest.Cli`), which saves two process starts a case."""

from __future__ import annotations

import codecs
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.conftest import Cli

from .served import free_port, run_cli

HUGE = "99999999999999999999999"


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]
    stdin: bytes = b""
    code: int = 1  # 1: a refused value; 2: a usage error
    says: str = ""  # in the one error line


def bad_bytes(text: str) -> str:
    """`text` with a byte that is not UTF-8, as the shell would pass it."""
    return os.fsdecode(text.encode() + b"\xff")


CASES = [
    Case("add: stdin not UTF-8", ("add", "s", "--role", "user"), b"caf\xe9 au lait", 1, "stdin"),
    Case("add: stdin UTF-16", ("add", "s", "--role", "user"), "hi".encode("utf-16"), 1, "UTF-8"),
    Case(
        "add: text argument not UTF-8",
        ("add", "s", "--role", "user", bad_bytes("hi")),
        code=2,
        says="not UTF-8",
    ),
    Case("add: role not UTF-8", ("add", "s", "--role", bad_bytes("user"), "hi"), code=2),
    Case("add: unknown role", ("add", "s", "--role", "wizard", "hi"), says="role"),
    Case(
        "add: message too large",
        ("add", "s", "--role", "user"),
        b"x" * (1024 * 1024 + 1),
        says="content",
    ),
    # `add` to a new key creates its session, but only for a message that can be stored.
    Case("add: bad role to a new key", ("add", "nope", "--role", "boss", "hi"), says="role"),
    Case("add: key not UTF-8", ("add", bad_bytes("s"), "--role", "user", "hi"), code=2),
    Case("history: --to-seq beyond 64 bits", ("history", "s", "--to-seq", HUGE), says="to_seq"),
    Case(
        "history: --from-seq beyond 64 bits", ("history", "s", "--from-seq", HUGE), says="from_seq"
    ),
    Case("history: negative --from-seq", ("history", "s", "--from-seq", "-1"), says="from_seq"),
    Case("history: --limit beyond 64 bits", ("history", "s", "--limit", HUGE), says="limit"),
    Case("history: --limit 0", ("history", "s", "--limit", "0"), says="limit"),
    Case("history: --to-seq not a number", ("history", "s", "--to-seq", "1e3"), code=2),
    Case(
        "context: --budget beyond 64 bits",
        ("context", "s", "--budget", HUGE),
        says="budget_tokens",
    ),
    Case("context: --trigger beyond 64 bits", ("context", "s", "--agent", "a", "--trigger", HUGE)),
    Case("sessions create: key with a space", ("sessions", "create", "--key", "a b"), says="key"),
    Case(
        "sessions create: metadata not an object",
        ("sessions", "create", "--metadata", "[1]"),
        code=2,
    ),
    Case("sessions create: metadata not JSON", ("sessions", "create", "--metadata", "{x"), code=2),
    Case("sessions create: ttl nonsense", ("sessions", "create", "--ttl", "soon"), code=2),
    Case(
        "sessions create: unknown phase",
        ("sessions", "create", "--phase", "nonsense"),
        says="phase",
    ),
    Case(
        "sessions update: unknown phase",
        ("sessions", "update", "s", "--phase", "nonsense"),
        says="phase",
    ),
    Case(
        "sessions list: --limit beyond 64 bits", ("sessions", "list", "--limit", HUGE), says="limit"
    ),
    Case("import: a file that does not exist", ("import", "/nonexistent/x.jsonl"), code=2),
]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One database for the module: every case must leave it as it found it."""
    url = f"sqlite:///{tmp_path_factory.mktemp('cli') / 'cli.db'}"
    in_process(url).ok("sessions", "create", "--key", "s")
    in_process(url).ok("add", "s", "--role", "user", "hello")
    return url


def in_process(db: str) -> Cli:
    """`turnkeeper … --db DB` run in this process, never reading the developer's config."""
    return Cli(db, {"TURNKEEPER_CONFIG": os.devnull})


def everything(db: str) -> bytes:
    """All of `db`, as `turnkeeper export -o -` writes it."""
    return in_process(db).ok("export", "-o", "-").stdout_bytes


def assert_refused(result: object, code: int, says: str = "") -> None:
    assert isinstance(result, __import__("subprocess").CompletedProcess)
    stderr = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert says in lines[0], stderr
    assert result.returncode == code, stderr


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_hostile_cli_input_is_one_error_line_and_changes_nothing(case: Case, db: str) -> None:
    before = everything(db)
    assert_refused(run_cli(*case.args, "--db", db, stdin=case.stdin), case.code, case.says)
    assert everything(db) == before


@pytest.mark.parametrize(
    ("encoding", "bom"),
    [("utf-16", b""), ("utf-32", b""), ("utf-16-be", codecs.BOM_UTF16_BE)],
)
def test_importing_a_wide_unicode_file_is_one_error(
    encoding: str, bom: bytes, db: str, tmp_path: Path
) -> None:
    file = tmp_path / "wide.jsonl"
    file.write_bytes(bom + everything(db).decode().encode(encoding))
    target = f"sqlite:///{tmp_path / 'fresh.db'}"
    result = run_cli("import", str(file), "--db", target)
    assert_refused(result, 1, "UTF-8")
    assert everything(target) == b""


def test_a_line_that_is_not_utf8_is_reported_and_the_rest_imported(db: str, tmp_path: Path) -> None:
    file = tmp_path / "mixed.jsonl"
    file.write_bytes(codecs.BOM_UTF8 + everything(db) + b'{"type": "session"\xff}\n')
    target = f"sqlite:///{tmp_path / 'fresh.db'}"
    result = run_cli("import", str(file), "--db", target)
    assert result.returncode == 1
    stderr = result.stderr.decode()
    assert "Traceback" not in stderr and f"{file}:3:" in stderr
    assert everything(target) == everything(db)


def test_a_database_in_a_missing_directory_is_an_error_and_nothing_is_made(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "typo" / "x.db"
    assert_refused(run_cli("sessions", "list", "--db", f"sqlite:///{missing}"), 1, "typo")
    assert not missing.parent.exists()


@pytest.mark.parametrize(
    "url",
    [
        "mysql://root@127.0.0.1/x",
        f"postgresql://nobody@127.0.0.1:{free_port()}/x",
        "postgresql://[::1/x",
    ],
    ids=["unknown scheme", "nothing listening", "broken address"],  # the same in every worker
)
def test_a_bad_database_url_is_one_error_line(url: str) -> None:
    assert_refused(run_cli("sessions", "list", "--db", url), 1)
