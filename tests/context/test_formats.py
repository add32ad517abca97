"""The window in OpenAI and Anthropic shapes: exact output for a conversation with tool calls."""

from __future__ import annotations

from tests.context.helpers import call
from turnkeeper.context.formats import openai_name, to_anthropic, to_openai
from turnkeeper.types import ContextMessage, ContextReport, ContextWindow, Role, StrategyName

NOTE = "[Note: 3 older messages truncated to stay within token limit]"
WEATHER = call("c1", "weather", '{"city": "Paris"}')
CLOCK = call("c2", "clock", "now please")


def window(*messages: ContextMessage) -> ContextWindow:
    report = ContextReport(StrategyName.SLIDING_WINDOW, "s1", 0, 0, 0, 0, 0, 0, 1, "approx")
    return ContextWindow(messages, report)


def entry(role: Role, content: str = "", **fields: object) -> ContextMessage:
    return ContextMessage(role, content, 1, **fields)  # type: ignore[arg-type]


CONVERSATION = window(
    entry(Role.SYSTEM, "You are terse.", seq=1),
    entry(Role.SYSTEM, NOTE, kind="marker"),
    entry(Role.USER, "Weather in Paris?", seq=5, author="Dr. Bob"),
    entry(Role.ASSISTANT, "Let me check.", seq=6, author="planner", tool_calls=(WEATHER, CLOCK)),
    entry(Role.TOOL, "18C", seq=7, tool_call_id="c1"),
    entry(Role.TOOL, "14:00", seq=8, tool_call_id="c2"),
    entry(Role.SYSTEM, "Be brief.", seq=9),
    entry(Role.ASSISTANT, "18C at 14:00.", seq=10),
    entry(Role.USER, "Thanks!", kind="pending"),
)


def test_openai_messages_carry_names_tool_calls_and_tool_call_ids() -> None:
    assert to_openai(CONVERSATION) == [
        {"role": "system", "content": "You are terse."},
        {"role": "system", "content": NOTE},
        {"role": "user", "content": "Weather in Paris?", "name": "Dr__Bob"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "name": "planner",
            "tool_calls": [WEATHER, CLOCK],
        },
        {"role": "tool", "content": "18C", "tool_call_id": "c1"},
        {"role": "tool", "content": "14:00", "tool_call_id": "c2"},
        {"role": "system", "content": "Be brief."},
        {"role": "assistant", "content": "18C at 14:00."},
        {"role": "user", "content": "Thanks!"},
    ]


def test_anthropic_turns_merge_roles_and_move_leading_system_text_to_system() -> None:
    assert to_anthropic(CONVERSATION) == {
        "system": "You are terse.\n\n" + NOTE,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me check."},
                    {"type": "tool_use", "id": "c1", "name": "weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "c2", "name": "clock", "input": {"raw": "now please"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "c1", "content": "18C"},
                    {"type": "tool_result", "tool_use_id": "c2", "content": "14:00"},
                    {"type": "text", "text": "[system] Be brief."},
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "18C at 14:00."}]},
            {"role": "user", "content": [{"type": "text", "text": "Thanks!"}]},
        ],
    }  # fmt: skip


def test_anthropic_omits_empty_text_and_gives_empty_arguments_an_empty_input() -> None:
    silent_call = call("c3", "ping", "")
    converted = to_anthropic(
        window(
            entry(Role.USER, "ping it"),
            entry(Role.ASSISTANT, "", tool_calls=(silent_call,)),
            entry(Role.USER, ""),
        )
    )
    assert converted == {
        "system": "",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "ping it"}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "c3", "name": "ping", "input": {}}],
            },
        ],
    }


def test_anthropic_wraps_json_that_is_not_an_object() -> None:
    listed = call("c4", "many", "[1, 2]")
    turn = to_anthropic(window(entry(Role.ASSISTANT, tool_calls=(listed,))))["messages"][0]
    assert turn["content"][0]["input"] == {"raw": "[1, 2]"}


def test_openai_name_keeps_only_allowed_characters_and_64_of_them() -> None:
    assert openai_name("Dr. Bob (ops)") == "Dr__Bob__ops_"
    assert openai_name("ä" * 70) == "_" * 64
    assert openai_name("agent-7_x") == "agent-7_x"


# -- prompt-cache marks ----------------------------------------------------------------------

MARK = {"type": "ephemeral"}


def sized(role: Role, content: str, tokens: int, **fields: object) -> ContextMessage:
    return ContextMessage(role, content, tokens, **fields)  # type: ignore[arg-type]


def marks(request: dict[str, object]) -> list[str]:
    """The texts (or tool ids) of the marked blocks, system first."""
    system = request["system"]
    assert isinstance(system, list)
    turns = request["messages"]
    assert isinstance(turns, list)
    blocks = [*system, *(block for turn in turns for block in turn["content"])]
    return [
        str(block.get("text") or block.get("id") or block.get("tool_use_id"))
        for block in blocks
        if "cache_control" in block
    ]


def test_cache_marks_the_whole_window_and_the_stored_system_prompt_not_the_marker() -> None:
    long_chat = window(
        sized(Role.SYSTEM, "You are terse.", 1500, seq=1),
        sized(Role.SYSTEM, NOTE, 20, kind="marker"),
        sized(Role.USER, "Weather in Paris?", 10, seq=5),
        sized(Role.ASSISTANT, "Sunny.", 10, seq=6),
        sized(Role.USER, "Thanks!", 5, kind="pending"),
    )
    cached = to_anthropic(long_chat, cache=True)
    assert cached["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": MARK},
        {"type": "text", "text": NOTE},
    ]
    assert marks(cached) == ["You are terse.", "Thanks!"]
    # the marks are all that changes
    plain = to_anthropic(long_chat)
    for turn in cached["messages"]:
        for block in turn["content"]:
            block.pop("cache_control", None)
    assert cached["messages"] == plain["messages"]


def test_cache_marks_nothing_under_the_minimum_prefix() -> None:
    short = window(
        sized(Role.SYSTEM, "You are terse.", 600, seq=1),
        sized(Role.USER, "Hi", 300, seq=2),
        sized(Role.ASSISTANT, "Hello.", 100, seq=3),
        sized(Role.USER, "Bye", 10, kind="pending"),
    )
    assert marks(to_anthropic(short, cache=True)) == []  # 1,010 tokens in all: under 1,024
    assert marks(to_anthropic(short, cache=True, min_cache_tokens=1000)) == ["Bye"]
    # the system prompt alone (600) is under the minimum even then; the window (1,010) is not
    assert marks(to_anthropic(short, cache=True, min_cache_tokens=601)) == ["Bye"]
    assert marks(to_anthropic(short, cache=True, min_cache_tokens=600)) == ["You are terse.", "Bye"]


def test_a_long_tool_loop_gets_a_mark_every_twenty_blocks_back_within_four() -> None:
    loop = [sized(Role.SYSTEM, "Use the tools.", 2000, seq=1), sized(Role.USER, "Go", 5, seq=2)]
    for n in range(30):  # 60 blocks: a call and its result, thirty times
        loop.append(sized(Role.ASSISTANT, "", 5, seq=3 + 2 * n, tool_calls=(call(f"c{n}"),)))
        loop.append(sized(Role.TOOL, f"result {n}", 5, seq=4 + 2 * n, tool_call_id=f"c{n}"))
    cached = to_anthropic(window(*loop), cache=True)
    # blocks: "Go" (0), then call n at 1 + 2n and its result at 2 + 2n. Marked: the last block
    # (c29's result, 60), the system prompt, then 20 and 40 blocks back (c19's and c9's results)
    assert marks(cached) == ["Use the tools.", "c9", "c19", "c29"]
    assert marks(to_anthropic(window(*loop), cache=True, breakpoints=2)) == [
        "Use the tools.",
        "c29",
    ]
    assert marks(to_anthropic(window(*loop), cache=True, breakpoints=0)) == []


def test_cache_takes_the_mark_it_is_given() -> None:
    chat = window(sized(Role.SYSTEM, "Rules.", 2000, seq=1), sized(Role.USER, "Hi", 5, seq=2))
    hour = {"type": "ephemeral", "ttl": "1h"}
    cached = to_anthropic(chat, cache=hour)
    assert cached["system"][0]["cache_control"] == hour
    assert cached["messages"][0]["content"][0]["cache_control"] == hour
    assert cached["messages"][0]["content"][0]["cache_control"] is not hour  # a copy per block


def test_a_note_inside_the_window_marks_what_comes_before_it() -> None:
    """`relevant` puts its note and the turns it recalled after its newest turns: the newest
    turns stay the start of the next window, so the block before the note is marked too."""
    recalled = window(
        sized(Role.SYSTEM, "You are terse.", 300, seq=1),
        sized(Role.USER, "Weather in Paris?", 600, seq=40),
        sized(Role.ASSISTANT, "Sunny.", 400, seq=41),
        sized(Role.SYSTEM, "[Note: 37 older messages left out …]", 20, kind="marker"),
        sized(Role.USER, "My code is 7731.", 10, seq=3),
        sized(Role.USER, "What was my code?", 5, kind="pending"),
    )
    assert marks(to_anthropic(recalled, cache=True)) == ["Sunny.", "What was my code?"]
    # 1,300 tokens before the note: under a minimum of 1,320, no mark there (1,335 in all)
    assert marks(to_anthropic(recalled, cache=True, min_cache_tokens=1320)) == ["What was my code?"]
