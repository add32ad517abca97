"""Token counting: exact and offline, with the chat format's per-message overhead.

A budget only means something if it is counted the way the model counts. The exact counters
are tiktoken encodings built from the BPE rank files that the `bpe-openai` package ships
(checked against tiktoken's published SHA-256), so nothing is downloaded, ever: plain
`tiktoken.get_encoding()` would fetch the file on first use and fail on an air-gapped server.

The chat format adds tokens around every message (OpenAI's cookbook: 3 per message, 1 more when
a `name` is set, 3 to prime the reply); `count_message` includes them, so the sum of a window's
message counts plus `REPLY_PRIMING` is what the model bills as prompt tokens.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import json
import threading
from collections.abc import Iterable, Mapping
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Protocol

from turnkeeper.errors import InvalidConfig

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3

APPROX_ENCODING = "approx_chars4"

_ENDOFTEXT = "<|endoftext|>"
_ENDOFPROMPT = "<|endofprompt|>"

# Regexes and special tokens as published in tiktoken_ext/openai_public.py.
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

_ENCODINGS: dict[str, dict[str, Any]] = {
    "cl100k_base": {
        "pattern": _CL100K_PATTERN,
        "sha256": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        "special": {
            _ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            _ENDOFPROMPT: 100276,
        },
    },
    "o200k_base": {
        "pattern": _O200K_PATTERN,
        "sha256": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        "special": {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    },
}

EXACT_ENCODINGS = tuple(_ENCODINGS)

# Context window of well-known models, by name prefix (longest prefix wins).
_CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4-1106": 128_000,
    "gpt-4-0125": 128_000,
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.5": 128_000,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4": 200_000,
    "claude": 200_000,
}


class TokenCounter(Protocol):
    """Counts tokens the way one model family does."""

    @property
    def encoding(self) -> str:
        """Name of the encoding (e.g. `o200k_base`, or `approx_chars4`)."""
        ...

    def count_text(self, text: str) -> int:
        """Tokens of `text` alone."""
        ...

    def count_message(
        self,
        role: str,
        content: str,
        *,
        name: str | None = None,
        tool_calls: Iterable[Mapping[str, Any]] | None = None,
        tool_call_id: str | None = None,
    ) -> int:
        """Tokens one chat message costs in a prompt, overhead included."""
        ...


class _ChatFormatCounter:
    """The chat-format arithmetic shared by every counter; subclasses count plain text."""

    encoding: str

    def count_text(self, text: str) -> int:
        raise NotImplementedError

    def count_message(
        self,
        role: str,
        content: str,
        *,
        name: str | None = None,
        tool_calls: Iterable[Mapping[str, Any]] | None = None,
        tool_call_id: str | None = None,
    ) -> int:
        tokens = TOKENS_PER_MESSAGE + self.count_text(role) + self.count_text(content)
        if name:
            tokens += TOKENS_PER_NAME + self.count_text(name)
        for call in tool_calls or ():
            function = call.get("function") or {}
            tokens += TOKENS_PER_MESSAGE + self.count_text(str(call.get("id", "")))
            tokens += self.count_text(str(function.get("name", "")))
            arguments = function.get("arguments", "")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, separators=(",", ":"))
            tokens += self.count_text(arguments)
        if tool_call_id:
            tokens += self.count_text(tool_call_id)
        return tokens


class TiktokenCounter(_ChatFormatCounter):
    """Exact counts with a tiktoken encoding built from bundled, hash-checked rank files."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self._encoder = _load_encoding(encoding)

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        return len(self._encoder.encode(text, disallowed_special=()))


class ApproxCounter(_ChatFormatCounter):
    """The `chars / 4` rule of thumb (seeds 000 and 001), for when speed beats exactness."""

    encoding = APPROX_ENCODING

    def count_text(self, text: str) -> int:
        return (len(text) + 3) // 4


_load_lock = threading.Lock()


def _bundled_data_dir() -> Path:
    """Where `bpe-openai` keeps its rank files, found without importing the package (its
    import loads a native tokenizer we do not use)."""
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise InvalidConfig("token_encoding", "the bpe-openai package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


@cache
def _load_encoding(name: str) -> Any:
    import tiktoken

    spec = _ENCODINGS.get(name)
    if spec is None:
        raise InvalidConfig(
            "token_encoding",
            f"unknown encoding {name!r}; choose one of {', '.join(EXACT_ENCODINGS)}"
            f" or {APPROX_ENCODING}",
        )
    with _load_lock:
        data = (_bundled_data_dir() / f"{name}.tiktoken.gz").read_bytes()
        raw = gzip.decompress(data)
        if hashlib.sha256(raw).hexdigest() != spec["sha256"]:
            raise InvalidConfig("token_encoding", f"bundled rank file for {name} is corrupt")
        ranks = {
            base64.b64decode(token): int(rank)
            for token, rank in (line.split() for line in raw.splitlines() if line)
        }
        return tiktoken.Encoding(
            name=name,
            pat_str=spec["pattern"],
            mergeable_ranks=ranks,
            special_tokens=spec["special"],
        )


def encoding_for_model(model: str | None, default: str) -> str:
    """The encoding a model uses (gpt-4o → o200k_base, gpt-4 → cl100k_base); `default` for
    models turnkeeper does not know or whose encoding it does not ship."""
    if not model:
        return default
    from tiktoken.model import encoding_name_for_model

    try:
        name = encoding_name_for_model(model)
    except KeyError:
        return default
    return name if name in _ENCODINGS else default


def context_window_for_model(model: str | None, default: int) -> int:
    """The context window (tokens) of a known model, by longest matching name prefix."""
    if not model:
        return default
    matches = [prefix for prefix in _CONTEXT_WINDOWS if model.startswith(prefix)]
    if not matches:
        return default
    return _CONTEXT_WINDOWS[max(matches, key=len)]


@lru_cache(maxsize=8)
def counter_for(encoding: str) -> TokenCounter:
    """A (shared, thread-safe) counter for an encoding name, exact or approximate."""
    if encoding == APPROX_ENCODING:
        return ApproxCounter()
    return TiktokenCounter(encoding)
