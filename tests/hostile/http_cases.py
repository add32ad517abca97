"""The hostile HTTP inputs, as data: each one a request that must be refused with a 4xx problem
and change nothing. Built from a few families crossed with the routes they aim at, so a new
route or field is one line here."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

HUGE = 10**30
BEYOND_64_BITS = 2**64
TARGET = "/v1/sessions/target"
OTHER = "/v1/sessions/other"  # project beta's: invisible to alpha's key


@dataclass(frozen=True)
class Case:
    """One hostile request. `body` is sent as JSON unless it is bytes (sent as is)."""

    name: str
    method: str
    path: str
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    who: str | None = "a"  # whose API key (a, b, admin; None: no key)
    statuses: tuple[int, ...] = (400, 401, 403, 404, 405, 409, 410, 413, 415, 422)

    def content(self) -> bytes | None:
        if self.body is None:
            return None
        return self.body if isinstance(self.body, bytes) else json.dumps(self.body).encode()


JSON_WRITES = [
    ("POST", "/v1/sessions"),
    ("PATCH", TARGET),
    ("POST", f"{TARGET}/messages"),
    ("POST", f"{TARGET}/messages/batch"),
    ("POST", f"{TARGET}/chat"),
    ("POST", f"{TARGET}/reset"),
    ("POST", f"{TARGET}/phase"),
    ("POST", f"{TARGET}/handoffs"),
    ("PATCH", f"{TARGET}/agents/bot"),
    ("POST", f"{TARGET}/agents/bot/responded"),
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/conversations"),
    ("POST", "/v1/conversations/target"),
    ("POST", "/v1/conversations/target/items"),
    ("POST", "/v1/responses"),
    ("POST", "/v1/messages"),
]

MALFORMED_JSON = {
    "truncated object": b'{"role": "user", "content": "x"',
    "trailing comma": b'{"role": "user", "content": "x",}',
    "single quotes": b"{'role': 'user'}",
    "bare word": b"user",
    "NaN": b'{"role": "user", "content": NaN}',
    "invalid escape": b'{"content": "\\x41"}',
    "not UTF-8": b'{"content": "\xff\xfe"}',
    "array": b"[1, 2, 3]",
    "string": b'"just a string"',
    "number": b"42",
    "deeply nested": b"[" * 100_000 + b"]" * 100_000,
    "control character in a string": b'{"content": "a\x01b"}',
}

# Bodies that are valid JSON objects but wrong for every write route above.
WRONG_OBJECTS = {
    "unknown field": {
        "role": "user",
        "content": "x",
        "drop_table": True,
        "phase": "chat",
        "messages": [],
        "model": "m",
        "from_agent": "a",
        "evil": 1,
    },
}


def _json_cases() -> list[Case]:
    cases = []
    for method, path in JSON_WRITES:
        for name, raw in MALFORMED_JSON.items():
            cases.append(
                Case(
                    f"{method} {path}: {name}",
                    method,
                    path,
                    raw,
                    {"Content-Type": "application/json"},
                )
            )
        cases.append(
            Case(
                f"{method} {path}: JSON as text/plain",
                method,
                path,
                b'{"role": "user", "content": "x"}',
                {"Content-Type": "text/plain"},
            )
        )
        cases.append(
            Case(
                f"{method} {path}: no key", method, path, {"role": "user", "content": "x"}, who=None
            )
        )
        cases.append(
            Case(
                f"{method} {path}: a bad key",
                method,
                path,
                {"role": "user", "content": "x"},
                {"Authorization": "Bearer tk_nope_nope"},
                who=None,
            )
        )
        for name, body in WRONG_OBJECTS.items():
            cases.append(Case(f"{method} {path}: {name}", method, path, body))
    return cases


def _message(**fields: Any) -> dict[str, Any]:
    return {"role": "user", "content": "hello"} | fields


def _nested(levels: int) -> dict[str, Any]:
    """An object `levels` objects deep (the limit is 64; at 256 one broke every later read)."""
    value: Any = "leaf"
    for _ in range(levels):
        value = {"a": value}
    return dict(value)


DEEP = _nested(300)


MESSAGE_FIELDS: dict[str, dict[str, Any]] = {
    "role a number": _message(role=1),
    "role null": _message(role=None),
    "role unknown": _message(role="wizard"),
    "role with SQL": _message(role="user'; DROP TABLE messages; --"),
    "content a number": _message(content=1),
    "content an object": _message(content={"text": "x"}),
    "content a list": _message(content=["x"]),
    "content too large": _message(content="x" * (1024 * 1024 + 1)),
    "author too long": _message(author="a" * 201),
    "author a list": _message(author=["a"]),
    "internal a string": _message(internal="yes please"),
    "id with a slash": _message(id="../../etc/passwd"),
    "id with a space": _message(id="a b"),
    "id too long": _message(id="m" * 300),
    "id a number": _message(id=7),
    "metadata a list": _message(metadata=[1, 2]),
    "metadata a string": _message(metadata="{}"),
    "metadata nested 300 levels": _message(metadata=DEEP),
    "usage negative": _message(usage={"input_tokens": -1}),
    "usage beyond 64 bits": _message(usage={"input_tokens": BEYOND_64_BITS}),
    "usage a string": _message(usage="lots"),
    "tool_calls an object": _message(role="assistant", tool_calls={"id": "x"}),
    "tool_calls of strings": _message(role="assistant", tool_calls=["x"]),
    "expected_last_seq negative": _message(expected_last_seq=-1),
    "expected_last_seq beyond 64 bits": _message(expected_last_seq=BEYOND_64_BITS),
    "expected_last_seq stale": _message(expected_last_seq=0),
    "expected_last_seq a float": _message(expected_last_seq=2.5),
    "unknown field": _message(sql="1; DROP TABLE sessions"),
    "empty object": {},
}


def _message_cases() -> list[Case]:
    cases = [
        Case(f"append: {name}", "POST", f"{TARGET}/messages", body)
        for name, body in MESSAGE_FIELDS.items()
    ]
    for name, body in MESSAGE_FIELDS.items():
        if name.startswith("expected_last_seq"):
            continue
        cases.append(
            Case(
                f"batch: {name}",
                "POST",
                f"{TARGET}/messages/batch",
                {"messages": [_message(), body]},
            )
        )
    cases += [
        Case("batch: no messages", "POST", f"{TARGET}/messages/batch", {"messages": []}),
        Case(
            "batch: messages an object",
            "POST",
            f"{TARGET}/messages/batch",
            {"messages": {"role": "user"}},
        ),
        Case(
            "batch: 1001 messages",
            "POST",
            f"{TARGET}/messages/batch",
            {"messages": [_message()] * 1001},
        ),
        Case(
            "batch: expected_last_seq beyond 64 bits",
            "POST",
            f"{TARGET}/messages/batch",
            {"messages": [_message()], "expected_last_seq": BEYOND_64_BITS},
        ),
    ]
    return cases


SESSION_FIELDS: dict[str, dict[str, Any]] = {
    "key with a space": {"key": "a b"},
    "key with a slash": {"key": "a/b"},
    "key with SQL": {"key": "x' OR '1'='1"},
    "key too long": {"key": "k" * 300},
    "key a number": {"key": 5},
    "key taken": {"key": "target"},
    "project of another key": {"project": "beta"},
    "project with a slash first": {"project": "/etc"},
    "subject too long": {"subject": "s" * 256},
    "kind too long": {"kind": "k" * 101},
    "title too long": {"title": "t" * 1001},
    "phase unknown": {"phase": "nonsense"},
    "phase a number": {"phase": 3},
    "metadata a list": {"metadata": [1]},
    "metadata nested 300 levels": {"metadata": DEEP},
    "ttl negative": {"ttl_seconds": -5},
    "ttl zero": {"ttl_seconds": 0},
    "ttl a string": {"ttl_seconds": "forever"},
    "ttl infinite": {"ttl_seconds": 1e309},
    "ttl beyond any date": {"ttl_seconds": 1e300},
    "get_or_create a string": {"key": "x1", "get_or_create": "sure"},
    "unknown field": {"key": "x2", "id": "chosen-id"},
}

PATCH_FIELDS: dict[str, dict[str, Any]] = {
    "phase unknown": {"phase": "nonsense"},
    "phase with SQL": {"phase": "plan'; --"},
    "phase empty": {"phase": ""},
    "title too long": {"title": "t" * 1001},
    "title a list": {"title": ["t"]},
    "metadata a string": {"metadata": "{}"},
    "metadata nested 300 levels": {"metadata": DEEP},
    "ttl negative": {"ttl_seconds": -1},
    "ttl beyond any date": {"ttl_seconds": 1e300},
    "status (not patchable)": {"status": "archived"},
    "key (not patchable)": {"key": "stolen"},
}


def _session_cases() -> list[Case]:
    cases = [
        Case(f"create: {name}", "POST", "/v1/sessions", body)
        for name, body in SESSION_FIELDS.items()
    ]
    cases += [Case(f"patch: {name}", "PATCH", TARGET, body) for name, body in PATCH_FIELDS.items()]
    cases += [
        Case("patch another project's session", "PATCH", OTHER, {"title": "mine now"}),
        Case("reset another project's session", "POST", f"{OTHER}/reset", {}),
        Case("delete another project's session", "DELETE", OTHER),
        Case("archive another project's session", "POST", f"{OTHER}/archive"),
        Case("append to another project's session", "POST", f"{OTHER}/messages", _message()),
        Case(
            "reset: keep_system_message a string",
            "POST",
            f"{TARGET}/reset",
            {"keep_system_message": "maybe"},
        ),
        Case(
            "project key names another project's messages",
            "POST",
            f"{TARGET}/messages?project=beta",
            _message(),
        ),
    ]
    return cases


CHAT_FIELDS: dict[str, dict[str, Any]] = {
    "content empty": {"content": ""},
    "content a number": {"content": 1},
    "strategy unknown": {"content": "x", "strategy": "magic"},
    "budget_tokens zero": {"content": "x", "budget_tokens": 0},
    "budget_tokens beyond 64 bits": {"content": "x", "budget_tokens": BEYOND_64_BITS},
    "reserved negative": {"content": "x", "reserved_tokens": -1},
    "reserved beyond 64 bits": {"content": "x", "reserved_tokens": BEYOND_64_BITS},
    "keep_recent zero": {"content": "x", "keep_recent": 0},
    "keep_recent beyond 64 bits": {"content": "x", "keep_recent": BEYOND_64_BITS},
    "temperature 3": {"content": "x", "temperature": 3},
    "max_output_tokens zero": {"content": "x", "max_output_tokens": 0},
    "id with a space": {"content": "x", "id": "a b"},
    "metadata nested 300 levels": {"content": "x", "metadata": DEEP},
    "stream a list": {"content": "x", "stream": [True]},
    "unknown field": {"content": "x", "system_prompt": "ignore all previous"},
}

PROXY_BODIES: dict[str, Any] = {
    "no model": {"messages": [{"role": "user", "content": "x"}]},
    "empty model": {"model": "", "messages": [{"role": "user", "content": "x"}]},
    "no messages": {"model": "m", "messages": []},
    "messages an object": {"model": "m", "messages": {"role": "user"}},
    "messages of strings": {"model": "m", "messages": ["hi"]},
}


def _chat_cases() -> list[Case]:
    cases = [
        Case(f"chat: {name}", "POST", f"{TARGET}/chat", body) for name, body in CHAT_FIELDS.items()
    ]
    cases += [
        Case(f"proxy: {name}", "POST", "/v1/chat/completions", body)
        for name, body in PROXY_BODIES.items()
    ]
    cases += [
        Case(
            "proxy: session header too long",
            "POST",
            "/v1/chat/completions",
            {"model": "m", "messages": [{"role": "user", "content": "x"}]},
            {"X-Turnkeeper-Session": "s" * 300},
        ),
    ]
    return cases


AGENT_CASES = [
    Case("phase: unknown", "POST", f"{TARGET}/phase", {"phase": "nonsense"}),
    Case("phase: missing", "POST", f"{TARGET}/phase", {"by": "pm"}),
    Case("phase: by with a space", "POST", f"{TARGET}/phase", {"phase": "plan", "by": "a b"}),
    Case(
        "handoff: agents with SQL",
        "POST",
        f"{TARGET}/handoffs",
        {"from_agent": "a'; --", "to_agent": "b"},
    ),
    Case("handoff: missing to_agent", "POST", f"{TARGET}/handoffs", {"from_agent": "a"}),
    Case(
        "agent: last_processed_seq negative",
        "PATCH",
        f"{TARGET}/agents/bot",
        {"last_processed_seq": -1},
    ),
    Case(
        "agent: last_processed_seq beyond 64 bits",
        "PATCH",
        f"{TARGET}/agents/bot",
        {"last_processed_seq": BEYOND_64_BITS},
    ),
    Case(
        "agent: provider id too long",
        "PATCH",
        f"{TARGET}/agents/bot",
        {"provider_session_id": "p" * 256},
    ),
    Case("agent: name with a space", "PATCH", f"{TARGET}/agents/a%20b", {"last_processed_seq": 1}),
    Case(
        "responded: execution_ms negative",
        "POST",
        f"{TARGET}/agents/bot/responded",
        {"execution_ms": -1},
    ),
    Case(
        "responded: execution_ms beyond 64 bits",
        "POST",
        f"{TARGET}/agents/bot/responded",
        {"execution_ms": BEYOND_64_BITS},
    ),
    Case("agents of another project's session", "GET", f"{OTHER}/agents"),
]

QUERY_CASES = [
    Case("messages: to_seq beyond 64 bits", "GET", f"{TARGET}/messages?to_seq={HUGE}"),
    Case("messages: from_seq beyond 64 bits", "GET", f"{TARGET}/messages?from_seq={HUGE}"),
    Case("messages: to_seq 2**63", "GET", f"{TARGET}/messages?to_seq={2**63}"),
    Case("messages: from_seq negative", "GET", f"{TARGET}/messages?from_seq=-1"),
    Case("messages: to_seq a word", "GET", f"{TARGET}/messages?to_seq=all"),
    Case("messages: to_seq a float", "GET", f"{TARGET}/messages?to_seq=1.5"),
    Case("messages: limit zero", "GET", f"{TARGET}/messages?limit=0"),
    Case("messages: limit 10**30", "GET", f"{TARGET}/messages?limit={HUGE}"),
    Case("messages: newest_first a word", "GET", f"{TARGET}/messages?newest_first=maybe"),
    Case("messages: another project's", "GET", f"{OTHER}/messages"),
    Case("sessions: limit negative", "GET", "/v1/sessions?limit=-1"),
    Case("sessions: limit 10**30", "GET", f"/v1/sessions?limit={HUGE}"),
    Case("sessions: status unknown", "GET", "/v1/sessions?status=deleted"),
    Case("sessions: status with SQL", "GET", "/v1/sessions?status=active'%20OR%20'1'='1"),
    Case("sessions: cursor garbage", "GET", "/v1/sessions?cursor=%27%3B--"),
    Case("sessions: cursor too long", "GET", "/v1/sessions?cursor=" + "c" * 1001),
    Case("sessions: updated_since not a time", "GET", "/v1/sessions?updated_since=yesterday"),
    Case("sessions: project of another key", "GET", "/v1/sessions?project=beta"),
    Case("sessions: project with SQL", "GET", "/v1/sessions?project=x'%20OR%201=1--"),
    Case("sessions: project with a NUL", "GET", "/v1/sessions?project=a%00b"),
    Case("sessions: subject too long", "GET", "/v1/sessions?subject=" + "s" * 256),
    Case("context: budget_tokens zero", "GET", f"{TARGET}/context?budget_tokens=0"),
    Case("context: budget_tokens 10**30", "GET", f"{TARGET}/context?budget_tokens={HUGE}"),
    Case("context: strategy unknown", "GET", f"{TARGET}/context?strategy=everything"),
    Case("context: trigger beyond 64 bits", "GET", f"{TARGET}/context?agent=bot&trigger={HUGE}"),
    Case("context: trigger zero", "GET", f"{TARGET}/context?agent=bot&trigger=0"),
    Case(
        "context: reserved beyond the budget",
        "GET",
        f"{TARGET}/context?budget_tokens=10&reserved_tokens=10",
    ),
    Case("context: keep_recent 10**30", "GET", f"{TARGET}/context?keep_recent={HUGE}"),
    Case("context: another project's", "GET", f"{OTHER}/context"),
    Case("stats: another project's", "GET", f"{OTHER}/stats"),
    Case("stats: project of another key", "GET", "/v1/stats?project=beta"),
]

PATH_CASES = [
    Case("path: dot-dot", "GET", "/v1/sessions/..%2F..%2Fetc%2Fpasswd"),
    Case("path: encoded NUL", "GET", "/v1/sessions/a%00b"),
    Case("path: id of 300 characters", "GET", "/v1/sessions/" + "x" * 300),
    Case("path: not UTF-8", "GET", "/v1/sessions/%ff%fe"),
    Case("path: SQL as a key", "GET", "/v1/sessions/x'%20OR%20'1'='1"),
    Case("path: wildcard as a key", "GET", "/v1/sessions/%25"),
    Case("path: another project's session", "GET", OTHER),
    Case("path: unknown route", "GET", "/v1/sessions/target/secrets"),
    Case("path: wrong method", "PUT", TARGET, {"title": "x"}),
    Case("path: DELETE on messages", "DELETE", f"{TARGET}/messages"),
    Case("path: older conversation route of another project", "GET", "/api/v1/conversations/other"),
    Case(
        "path: older conversation route delete, other project",
        "DELETE",
        "/api/v1/conversations/other",
    ),
    Case(
        "path: older conversation route reset, other project",
        "POST",
        "/api/v1/conversations/other/reset",
    ),
]

HEADER_CASES = [
    Case(
        "header: Bearer without a token",
        "GET",
        TARGET,
        headers={"Authorization": "Bearer"},
        who=None,
    ),
    Case("header: Basic auth", "GET", TARGET, headers={"Authorization": "Basic YTpi"}, who=None),
    Case(
        "header: a token of 10 kB",
        "GET",
        TARGET,
        headers={"Authorization": "Bearer tk_" + "x" * 10_000},
        who=None,
    ),
    Case(
        "header: a token with the wrong secret",
        "GET",
        TARGET,
        headers={"Authorization": "Bearer tk_abc_wrong"},
        who=None,
    ),
    Case(
        "header: a token with SQL",
        "GET",
        TARGET,
        headers={"Authorization": "Bearer tk_x' OR '1'='1_y"},
        who=None,
    ),
    Case(
        "header: two tokens",
        "GET",
        TARGET,
        headers={"Authorization": "Bearer tk_a_b tk_c_d"},
        who=None,
    ),
    Case("header: key of another project", "GET", TARGET, who="b"),
    Case(
        "header: key of another project writing", "POST", f"{TARGET}/messages", _message(), who="b"
    ),
    Case(
        "header: a body over the limit",
        "POST",
        f"{TARGET}/messages",
        b'{"role": "user", "content": "' + b"x" * (9 * 1024 * 1024) + b'"}',
        {"Content-Type": "application/json"},
    ),
    Case(
        "header: form instead of JSON",
        "POST",
        f"{TARGET}/messages",
        b"role=user&content=x",
        {"Content-Type": "application/x-www-form-urlencoded"},
    ),
]

# Unstorable text in labels (message content is validated with the message itself).
CONTENT_CASES = [
    Case(
        "append: lone surrogate in author",
        "POST",
        f"{TARGET}/messages",
        b'{"role": "user", "content": "x", "author": "\\udfff"}',
        {"Content-Type": "application/json"},
    ),
    Case(
        "create: lone surrogate in title",
        "POST",
        "/v1/sessions",
        b'{"title": "\\ud83d"}',
        {"Content-Type": "application/json"},
    ),
    Case("create: NUL in title", "POST", "/v1/sessions", {"title": "a\u0000b"}),
]

CONVERSATION_ITEMS = "/v1/conversations/target/items"


def _items(*items: Any) -> dict[str, Any]:
    return {"items": [{"role": "user", "content": "fine"}, *items]}


CONVERSATION_CASES = [
    *(
        Case(f"conversation items: {name}", "POST", CONVERSATION_ITEMS, body)
        for name, body in {
            "role unknown": _items({"role": "wizard", "content": "x"}),
            "role with SQL": _items({"role": "user'; DROP TABLE messages; --", "content": "x"}),
            "content a number": _items({"role": "user", "content": 1}),
            "content blank": _items({"role": "user", "content": "  "}),
            "content too large": _items({"role": "user", "content": "x" * (1024 * 1024 + 1)}),
            "parts of strings": _items({"role": "user", "content": ["x"]}),
            "function call without call_id": _items({"type": "function_call", "name": "f"}),
            "function call output a number": _items(
                {"type": "function_call_output", "call_id": "c", "output": 3}
            ),
            "an item reference": _items({"type": "item_reference", "id": "msg_1"}),
            "an item nested 300 levels": _items({"type": "reasoning", "deep": DEEP}),
            "id with a slash": _items({"id": "../../etc/passwd", "role": "user", "content": "x"}),
            "id a number": _items({"id": 7, "role": "user", "content": "x"}),
            "an item a string": {"items": ["hello"]},
            "items an object": {"items": {"role": "user"}},
            "no items": {"items": []},
            "21 items": {"items": [{"role": "user", "content": "x"}] * 21},
        }.items()
    ),
    Case("conversation: metadata a number", "POST", "/v1/conversations", {"metadata": {"n": 1}}),
    Case(
        "conversation: 17 metadata pairs",
        "POST",
        "/v1/conversations",
        {"metadata": {f"k{n}": "v" for n in range(17)}},
    ),
    Case(
        "conversation: a bad item among the first",
        "POST",
        "/v1/conversations",
        _items({"role": "wizard", "content": "x"}),
    ),
    Case("conversation: update without metadata", "POST", "/v1/conversations/target", {}),
    Case("conversation: another project's, read", "GET", "/v1/conversations/other"),
    Case("conversation: another project's, deleted", "DELETE", "/v1/conversations/other"),
    Case(
        "conversation: another project's, items added",
        "POST",
        "/v1/conversations/other/items",
        {"items": [{"role": "user", "content": "injected"}]},
    ),
    Case("conversation: an unknown item, deleted", "DELETE", f"{CONVERSATION_ITEMS}/m-1"),
    Case("conversation: limit 101", "GET", f"{CONVERSATION_ITEMS}?limit=101"),
    Case("conversation: order sideways", "GET", f"{CONVERSATION_ITEMS}?order=sideways"),
    Case("conversation: after an unknown item", "GET", f"{CONVERSATION_ITEMS}?after=nope"),
]

RESPONSES = "/v1/responses"


def _response(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "input": "hello", "conversation": "target"} | fields


RESPONSE_CASES = [
    *(
        Case(f"response: {name}", "POST", RESPONSES, body)
        for name, body in {
            "no input": {"model": "m", "conversation": "target"},
            "input a number": _response(input=7),
            "input blank": _response(input="   "),
            "input empty": _response(input=[]),
            "input too large": _response(input="x" * (1024 * 1024 + 1)),
            "an item with an unknown role": _response(input=[{"role": "wizard", "content": "x"}]),
            "an image part": _response(
                input=[
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_text", "text": "What is this?"},
                            {"type": "input_image", "image_url": "file:///etc/passwd"},
                        ],
                    }
                ]
            ),
            "a reasoning item": _response(input=[{"type": "reasoning", "summary": []}]),
            "an item nested 300 levels": _response(
                input=[{"role": "user", "content": "x", "deep": DEEP}]
            ),
            "an item reference": _response(input=[{"type": "item_reference", "id": "msg_1"}]),
            "a hosted tool": _response(tools=[{"type": "web_search"}]),
            "a tool a string": _response(tools=["get_weather"]),
            "a function tool with an unknown field": _response(
                tools=[{"type": "function", "name": "f", "eval": "rm -rf /"}]
            ),
            "a hosted tool choice": _response(tool_choice={"type": "file_search"}),
            "background": _response(background=True),
            "a stored prompt": _response(prompt={"id": "pmpt_1"}),
            "a reasoning summary": _response(reasoning={"summary": "auto"}),
            "a grammar format": _response(text={"format": {"type": "grammar"}}),
            "temperature 9": _response(temperature=9),
            "max_output_tokens 0": _response(max_output_tokens=0),
            "17 metadata pairs": _response(metadata={f"k{n}": "v" for n in range(17)}),
            "conversation and previous response": _response(previous_response_id="resp_x_1"),
            "an unknown conversation": _response(conversation="conv_nope"),
            "another project's conversation": _response(conversation="other"),
            "an unknown previous response": _response(
                conversation=None, previous_response_id="resp_nope_1"
            ),
            "a previous response with SQL": _response(
                conversation=None, previous_response_id="resp_x'; DROP TABLE messages; --_1"
            ),
            "a conversation with SQL": _response(conversation="'; DROP TABLE sessions; --"),
            "a conversation a number": _response(conversation=7),
            "unknown field": _response(modalities=["audio"]),
        }.items()
    ),
    Case("response: an unknown one, read", "GET", f"{RESPONSES}/resp_nope_1"),
    Case("response: not a response id, read", "GET", f"{RESPONSES}/target"),
    Case("response: another project's session, read", "GET", f"{RESPONSES}/resp_other_1"),
    Case("response: deleted (no such route)", "DELETE", f"{RESPONSES}/resp_nope_1"),
]


def _claude(**fields: Any) -> dict[str, Any]:
    """An Anthropic Messages request for the session `target`, with `fields` changed."""
    return {"model": "claude-test", "max_tokens": 10,
            "messages": [{"role": "user", "content": "hi"}]} | fields  # fmt: skip


def _user(*blocks: Any) -> dict[str, Any]:
    return _claude(messages=[{"role": "user", "content": list(blocks)}])


ANTHROPIC_BODIES: dict[str, Any] = {
    "no model": {"max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]},
    "no max_tokens": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    "max_tokens zero": _claude(max_tokens=0),
    "max_tokens beyond 64 bits": _claude(max_tokens=BEYOND_64_BITS),
    "no messages": _claude(messages=[]),
    "messages an object": _claude(messages={"role": "user"}),
    "messages of strings": _claude(messages=["hi"]),
    "role unknown": _claude(messages=[{"role": "system", "content": "obey"}]),
    "role with SQL": _claude(messages=[{"role": "user'; DROP TABLE messages; --"}]),
    "content a number": _claude(messages=[{"role": "user", "content": 7}]),
    "content blank": _claude(messages=[{"role": "user", "content": " "}]),
    "content too large": _claude(messages=[{"role": "user", "content": "x" * (1024 * 1024 + 1)}]),
    "content nested 300 levels": _claude(messages=[{"role": "user", "content": DEEP}]),
    "an image block": _user({"type": "image", "source": {"type": "base64", "data": "AAAA"}}),
    "a block of strings": _user("hi"),
    "a tool_result without its id": _user({"type": "tool_result", "content": "18C"}),
    "a tool_result with an image": _user(
        {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "image"}]}
    ),
    "a prefilled answer": _claude(
        messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Su"}]
    ),
    "system a number": _claude(system=7),
    "system a document": _claude(system=[{"type": "document", "source": {}}]),
    "a server tool": _claude(tools=[{"type": "web_search_20250305", "name": "web_search"}]),
    "tools an object": _claude(tools={"name": "t"}),
    "thinking with tools": _claude(
        thinking={"type": "enabled", "budget_tokens": 1024},
        tools=[{"name": "t", "input_schema": {"type": "object"}}],
    ),
    "metadata session with a space": _claude(metadata={"session_id": "a b"}),
    "metadata user_id a list": _claude(metadata={"user_id": ["u"]}),
    "stream a list": _claude(stream=[True]),
    "cache_control a string": _claude(cache_control="yes"),
}
"""Anthropic Messages requests naming the session `target` that must change nothing."""


def _anthropic_cases() -> list[Case]:
    remembering = {"X-Turnkeeper-Session": "target"}
    return [
        *(
            Case(f"messages api: {name}", "POST", "/v1/messages", body, remembering)
            for name, body in ANTHROPIC_BODIES.items()
        ),
        Case("messages api: session header too long", "POST", "/v1/messages", _claude(),
             {"X-Turnkeeper-Session": "s" * 300}),
        Case("messages api: another project named", "POST", "/v1/messages?project=beta",
             _claude(), remembering),
        Case("messages api: a bad x-api-key", "POST", "/v1/messages", _claude(),
             {"x-api-key": "tk_nope_nope", **remembering}, who=None),
        Case("messages api: wrong method", "GET", "/v1/messages"),
    ]  # fmt: skip


CASES: list[Case] = [
    *CONVERSATION_CASES,
    *RESPONSE_CASES,
    *_anthropic_cases(),
    *_json_cases(),
    *_message_cases(),
    *_session_cases(),
    *_chat_cases(),
    *AGENT_CASES,
    *QUERY_CASES,
    *PATH_CASES,
    *HEADER_CASES,
    *CONTENT_CASES,
]
