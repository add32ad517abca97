"""Token counting: exact and offline, with the chat format's per-message overhead.

A budget only means something if it is counted the way the model counts. The exact counters
are tiktoken encodings built by tiktoken's own constructors (`tiktoken_ext.openai_public`: their
patterns, special tokens and the SHA-256 of each rank file) through its public `Encoding`
class, with the one thing that would reach the network, reading the BPE rank file, served from
the copies shipped in this package (`turnkeeper/encodings/`, gzip-compressed, 2.5 MB for both;
xz made them 1.7 MB but took five times as long to read back, in every process that counts)
and checked against tiktoken's hash. Plain `tiktoken.get_encoding()` would download the file on
first use and fail on an air-gapped server.

The chat format adds tokens around every message (OpenAI's cookbook: 3 per message, 1 more when
a `name` is set, 3 to prime the reply); `count_message` includes them, so the sum of a window's
message counts plus `REPLY_PRIMING` is what the model bills as prompt tokens.
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import json
import threading
import types
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from functools import cache, cached_property, lru_cache
from pathlib import Path
from typing import Any

from turnkeeper import _speedups
from turnkeeper.errors import InvalidConfig

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3

APPROX_ENCODING = "approx_chars4"

EXACT_ENCODINGS = ("cl100k_base", "o200k_base")
"""The encodings whose rank files ship with turnkeeper (GPT-4 / GPT-3.5; GPT-4o and later)."""

_RANK_FILES = Path(__file__).parent / "encodings"

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


class TokenCounter(ABC):
    """Counts tokens the way one model family does: `count_text` is the encoding's own (a
    subclass's), and the chat format's overhead around each message (`count_message`) is the
    same arithmetic for every counter."""

    encoding: str
    """Name of the encoding (e.g. `o200k_base`, or `approx_chars4`)."""

    @abstractmethod
    def count_text(self, text: str) -> int:
        """Tokens of `text` alone."""

    @cached_property
    def _role_tokens(self) -> dict[str, int]:
        """Tokens of each role name, counted once per counter: every message names one of a
        few roles, and encoding it again for each message is a share of every append."""
        return {}

    def count_role(self, role: str) -> int:
        """Tokens of a role name (as `count_text`, remembered)."""
        tokens = self._role_tokens.get(role)
        if tokens is None:
            tokens = self._role_tokens[role] = self.count_text(role)
        return tokens

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
        tokens = TOKENS_PER_MESSAGE + self.count_role(role) + self.count_text(content)
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


class TiktokenCounter(TokenCounter):
    """Exact counts with a tiktoken encoding built from shipped, hash-checked rank files."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self._encoder = _load_encoding(encoding)

    def count_text(self, text: str) -> int:
        # `encode_ordinary`: special tokens' text counted as ordinary text, as a model given
        # that text in a message would see it.
        return len(self._encoder.encode_ordinary(text)) if text else 0


class ApproxCounter(TokenCounter):
    """The `chars / 4` rule of thumb, for when speed beats exactness."""

    encoding = APPROX_ENCODING

    def count_text(self, text: str) -> int:
        return (len(text) + 3) // 4


_load_lock = threading.Lock()


def _shipped_ranks(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
    """tiktoken's `load_tiktoken_bpe(url, expected_hash)`, answered from the rank file of the
    same name shipped in this package instead of a download."""
    name = url.rsplit("/", 1)[-1]
    path = _RANK_FILES / f"{name}.gz"
    if not path.is_file():
        raise InvalidConfig("token_encoding", f"{name} is not shipped with turnkeeper")
    raw = gzip.decompress(path.read_bytes())
    if expected_hash is not None and hashlib.sha256(raw).hexdigest() != expected_hash:
        raise InvalidConfig("token_encoding", f"the shipped rank file {name} is corrupt")
    # Each line is a token in base64 and its rank; `a2b_base64` is what `base64.b64decode`
    # calls, without its per-call type checks (200,000 lines, in every process that counts).
    fields = raw.split()
    return dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2]), strict=True))


def _offline(constructor: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """The same constructor, run with `load_tiktoken_bpe` bound to `_shipped_ranks` in a copy
    of its module's globals (tiktoken's module itself is not touched)."""
    namespace = {**constructor.__globals__, "load_tiktoken_bpe": _shipped_ranks}
    return types.FunctionType(constructor.__code__, namespace, constructor.__name__)


@cache
def _load_encoding(name: str) -> Any:
    import tiktoken
    from tiktoken_ext import openai_public

    if name not in EXACT_ENCODINGS:
        raise InvalidConfig(
            "token_encoding",
            f"unknown encoding {name!r}; choose one of {', '.join(EXACT_ENCODINGS)}"
            f" or {APPROX_ENCODING}",
        )
    with _load_lock:
        encoding = tiktoken.Encoding(**_offline(openai_public.ENCODING_CONSTRUCTORS[name])())
    return _speedups.without_python_ranks(encoding)


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
    return name if name in EXACT_ENCODINGS else default


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
