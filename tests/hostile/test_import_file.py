"""`turnkeeper import` trusts nothing in the file: tokens and totals are counted again, every
limit an append applies holds, seqs run without gaps, and each bad line is one `FILE:LINE`
error (never a traceback) while the rest is imported — through the CLI as a user runs it, and
through the library on every backend."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import turnkeeper
from turnkeeper.service import Turnkeeper
from turnkeeper.types import NewMessage
from turnkeeper.validation import MAX_JSON_DEPTH, MAX_WHOLE

from .served import run_cli

AT = "2026-01-01T12:00:00.000000+00:00"
BIG = "hello " * 74_000
"""About 74,000 tokens: far beyond the 1,000-token window of the budget test."""
LIMIT = 1024 * 1024
"""The default `max_message_bytes`."""


def _id(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def session(n: int, **fields: Any) -> dict[str, Any]:
    record = {
        "type": "session", "format": 2, "id": _id(n), "key": f"s{n}", "project": "p",
        "subject": None, "kind": None, "title": None, "phase": None, "status": "active",
        "created_at": AT, "updated_at": AT, "expires_at": None, "message_count": 0,
        "last_seq": 0, "stored_tokens": 0, "usage_input_tokens": 0, "usage_output_tokens": 0,
        "metadata": {}, "version": 1,
    }  # fmt: skip
    return record | fields


def message(n: int, seq: int, content: str = "hi", **fields: Any) -> dict[str, Any]:
    record = {
        "type": "message", "id": f"m{n}-{seq}", "session_id": _id(n), "seq": seq,
        "role": "user", "author": None, "content": content, "internal": False,
        "created_at": AT, "tokens": 3, "usage": None, "tool_calls": None,
        "tool_call_id": None, "metadata": {},
    }  # fmt: skip
    return record | fields


def nested_text(levels: int) -> str:
    return '{"a":' * levels + '"leaf"' + "}" * levels


# Each entry: a line of the file, and what is wrong with it (None: nothing).
LINES: list[tuple[str, str | None]] = [
    # 1: a 74,000-token message that says it costs -49,990 tokens, and a reply.
    (json.dumps(session(1, stored_tokens=-49_990)), None),
    (json.dumps(message(1, 1, BIG, tokens=-49_990)), None),
    (json.dumps(message(1, 2, "ok", role="assistant")), None),
    # 2: a gap in the seqs (1, 7); what follows the gap cannot be stored either.
    (json.dumps(session(2)), None),
    (json.dumps(message(2, 1)), None),
    (json.dumps(message(2, 7)), "seq: is 7 where 2 was expected"),
    (json.dumps(message(2, 8)), "seq: is 8 where 2 was expected"),
    # 3: negative totals (the store's own sums replace them).
    (json.dumps(session(3, message_count=-4, last_seq=-4, usage_input_tokens=-9)), None),
    (json.dumps(message(3, 1)), None),
    # 4: content over the limit, a lone surrogate, negative usage, a seq of 2**63.
    (json.dumps(session(4)), None),
    (json.dumps(message(4, 1)), None),
    (json.dumps(message(4, 2, "x" * (LIMIT + 1))), f"content: is {LIMIT + 1} bytes"),
    (json.dumps(message(4, 2, "\ud800")), "content: contains a lone surrogate (U+D800)"),
    (
        json.dumps(message(4, 2, usage={"input_tokens": -5, "output_tokens": 1})),
        "usage: input_tokens, output_tokens, cache_read_input_tokens and cache_creation_input_tokens"
        " must be whole numbers",
    ),
    (json.dumps(message(4, 2**63)), f"seq: is {2**63} where 2 was expected"),
    (json.dumps(message(4, 2, "fine at last")), None),
    (json.dumps(message(4, 3, id="m4-1")), "id: 'm4-1' is an earlier message's id"),
    # 5: metadata nested too deep, and a line nested 100,000 levels deep.
    (json.dumps(session(5)), None),
    (
        json.dumps(message(5, 1, metadata={"x": 1})).replace('{"x": 1}', nested_text(300)),
        f"metadata: nests objects and arrays more than {MAX_JSON_DEPTH} levels deep",
    ),
    ("[" * 100_000 + "]" * 100_000, "a record must be a JSON object"),
    (
        json.dumps(message(5, 1, metadata={"x": 1})).replace('{"x": 1}', nested_text(100_000)),
        f"metadata: nests objects and arrays more than {MAX_JSON_DEPTH} levels deep",
    ),
    (json.dumps(message(5, 1)), None),
    # 6-8: sessions refused as a whole, on their own line; their messages are left out.
    (json.dumps(session(6, version=2**63)), f"version: must be at most {MAX_WHOLE}"),
    (json.dumps(message(6, 1)), None),
    (json.dumps(session(7, title="\udfff")), "title: contains a lone surrogate (U+DFFF)"),
    (json.dumps(session(8, metadata={"x": 1})).replace('{"x": 1}', nested_text(300)),
     f"metadata: nests objects and arrays more than {MAX_JSON_DEPTH} levels deep"),
    # 9: all is well after all that.
    (json.dumps(session(9)), None),
    (json.dumps(message(9, 1, "the last word")), None),
]  # fmt: skip

BAD_LINES = {number: problem for number, (_, problem) in enumerate(LINES, 1) if problem}
ERROR = re.compile(r"^(?:error: )?(.+):(\d+): (.+)$")


@pytest.fixture
def hostile_file(tmp_path: Path) -> Path:
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(line for line, _ in LINES) + "\n", encoding="utf-8")
    return path


def assert_one_error_per_bad_line(errors: list[str], file: Path) -> None:
    found: dict[int, str] = {}
    for error in errors:
        parsed = ERROR.match(error)
        assert parsed is not None and parsed[1] == str(file), error
        assert int(parsed[2]) not in found, f"two errors for line {parsed[2]}"
        found[int(parsed[2])] = parsed[3]
    assert sorted(found) == sorted(BAD_LINES), errors
    for number, problem in BAD_LINES.items():
        assert found[number].startswith(problem), (number, found[number])


def assert_the_rest_is_imported(tk: Turnkeeper) -> None:
    """What the good lines hold is stored, with counts made here, not read from the file."""
    counted = tk.draft(NewMessage("user", BIG)).tokens
    first = tk.get_session(_id(1))
    big, reply = tk.history(first)
    assert big.tokens == counted > 74_000
    assert first.stored_tokens == big.tokens + reply.tokens
    window = tk.context(first, budget_tokens=1000)  # the budget promise holds
    assert 0 < window.report.tokens_used <= 1000
    assert window.messages[-1].content == "ok" and BIG not in [m.content for m in window.messages]
    expected = {2: ["hi"], 3: ["hi"], 4: ["hi", "fine at last"], 5: ["hi"], 9: ["the last word"]}
    for n, contents in expected.items():
        stored = tk.get_session(_id(n))
        messages = tk.history(stored)
        assert [m.content for m in messages] == contents
        assert [m.seq for m in messages] == list(range(1, len(contents) + 1))
        assert (stored.message_count, stored.last_seq) == (len(contents), len(contents))
        assert stored.stored_tokens == sum(m.tokens for m in messages) > 0
        assert (stored.usage_input_tokens, stored.usage_output_tokens) == (0, 0)
    assert {s.key for s in tk.list_sessions(project="p").items} == {
        "s1",
        "s2",
        "s3",
        "s4",
        "s5",
        "s9",
    }


def test_the_cli_reports_each_bad_line_once_and_imports_the_rest(
    hostile_file: Path, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'target.db'}"
    result = run_cli("import", str(hostile_file), "--db", db)
    stderr = result.stderr.decode()
    assert result.returncode == 1 and "Traceback" not in stderr, stderr[-2000:]
    assert_one_error_per_bad_line(stderr.strip().splitlines(), hostile_file)
    with turnkeeper.open(db) as tk:
        assert_the_rest_is_imported(tk)
    again = run_cli("import", str(hostile_file), "--db", db, "--json")  # idempotent
    assert json.loads(again.stdout)["messages_added"] == 0


def test_the_library_reports_each_bad_line_once_and_imports_the_rest(
    tk: Turnkeeper, hostile_file: Path
) -> None:
    report = tk.transfer.import_sessions(hostile_file)
    assert_one_error_per_bad_line(report.errors, hostile_file)
    assert (report.sessions_created, report.messages_added) == (6, 8)
    assert_the_rest_is_imported(tk)


def test_an_import_into_a_session_that_moved_on_keeps_its_version_and_seqs(
    tk: Turnkeeper, tmp_path: Path
) -> None:
    """The file's older version never replaces a newer one (caches key by it), and a message
    whose id the session holds at another seq stops the import of that session there, rather
    than leaving a gap."""
    file = tmp_path / "old.jsonl"
    file.write_text(json.dumps(session(1)) + "\n" + json.dumps(message(1, 1)) + "\n")
    tk.transfer.import_sessions(file)
    stored = tk.get_session(_id(1))
    tk.append(stored, "user", "local", id="m1-3")
    moved = tk.get_session(stored)
    grown = [session(1), message(1, 1), message(1, 2, "two"), message(1, 3, "three")]
    file.write_text("".join(json.dumps(record) + "\n" for record in grown))
    report = tk.transfer.import_sessions(file)
    assert report.messages_added == 0 and len(report.errors) == 1
    assert "message 'm1-3' (seq 3) is stored in this session at another seq" in report.errors[0]
    assert tk.get_session(stored).version >= moved.version
    assert [(m.seq, m.content) for m in tk.history(stored)] == [(1, "hi"), (2, "local")]


def test_what_older_versions_stored_imports_as_it_was(tk: Turnkeeper, tmp_path: Path) -> None:
    """A key with `/` and a free-text phase were accepted once: their exports still import."""
    file = tmp_path / "old.jsonl"
    older = [session(1, key="team/42", phase="review"), message(1, 1)]
    file.write_text("".join(json.dumps(record) + "\n" for record in older))
    report = tk.transfer.import_sessions(file)
    assert (report.errors, report.sessions_created, report.messages_added) == ([], 1, 1)
    stored = tk.get_session("team/42", project="p")
    assert (stored.id, stored.phase) == (_id(1), "review")
