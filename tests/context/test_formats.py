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
