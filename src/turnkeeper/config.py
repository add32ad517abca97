"""Settings: one validated object, built at the edge (CLI entry point, app factory) and passed in.

Precedence, highest first: explicit arguments (e.g. `--db`), `TURNKEEPER_*` environment
variables, the TOML config file, then the defaults below. The config file is
`$TURNKEEPER_CONFIG` if set, else `turnkeeper.toml` in the user's config directory
(platformdirs); keys may sit at the top level or under a `[turnkeeper]` table.

Key names follow the older designs (see docs/compatibility.md): the older conversation
service's (`session_expiration`, `cleanup_interval`, `token_strategy`, `max_tokens` (now
`budget_tokens`), `keep_recent_messages`) and the personal agent's (`max_history_messages`, `max_context_tokens`,
`reserved_tokens`, `context_strategy`); the aliases are accepted too.

The model providers' own variables are read by convention, below all of turnkeeper's settings:
`OPENAI_API_KEY` and `OPENAI_BASE_URL` configure the OpenAI-compatible upstream, and
`ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL` the Anthropic one, when turnkeeper's own settings of
that upstream (`llm_base_url`, `llm_api_key`; `anthropic_base_url`, `anthropic_api_key`) are not
given. A provider's key is never sent to an endpoint turnkeeper's settings chose elsewhere (see
`PROVIDER_VARIABLES`).
"""

from __future__ import annotations

import functools
import os
import re
import tomllib
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import platformdirs
from pydantic import (
    AliasChoices,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from turnkeeper import _speedups
from turnkeeper.errors import InvalidConfig
from turnkeeper.tokens import APPROX_ENCODING, EXACT_ENCODINGS
from turnkeeper.types import CutMode, StrategyName
from turnkeeper.validation import NAME_PATTERN

APP_NAME = "turnkeeper"

DEFAULT_SUMMARY_PROMPT = (
    "Summarize this conversation history in 2-3 sentences. "
    "Focus on what the user asked about and what was recommended."
)
"""The default of `summary_prompt`: a summary of two or three sentences (docs/compatibility.md
says where it came from)."""

_STRATEGY_ALIASES = {"summarization": "summarize", "sliding": "sliding_window"}
_DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)\s*([dhms]|ms)\s*)+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|[dhms])")
_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_HOST_NAME = re.compile(r"^(?:[a-z0-9_-]+(?:\.[a-z0-9_-]+)*|\[[0-9a-f:.]+\])$")
"""A host name or IP address as a Host header carries it (no port): DNS labels, an IPv4
address, or an IPv6 address in brackets."""
_PROJECT_NAME = re.compile(NAME_PATTERN)
"""A project's name, as the API accepts it."""


def parse_duration(value: Any) -> Any:
    """Accept Go-style durations as the older conversation service writes them
    ("24h", "1h30m", "90s", "2d");
    anything else is left for pydantic (seconds, ISO 8601 "PT2H", timedelta)."""
    if isinstance(value, str) and _DURATION.match(value):
        seconds = sum(
            float(amount) * _UNIT_SECONDS[unit] for amount, unit in _DURATION_PART.findall(value)
        )
        return timedelta(seconds=seconds)
    return value


def _retention_duration(value: Any) -> Any:
    """A retention: unset, 0 or `never` is None (kept for ever), a number is seconds, else a
    duration as `parse_duration` reads it (a negative one is refused by the caller)."""
    if value is None or value in (0, "0", "never", "none", ""):
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(seconds=value)
    return parse_duration(value)


def default_database_url() -> str:
    """The embedded default: a SQLite file in the user's data directory."""
    return f"sqlite:///{_data_dir() / 'turnkeeper.db'}"


def demo_database_url() -> str:
    """Where `turnkeeper demo` writes unless given `--db`: its own file beside the default
    database, so a tour never adds to a user's real conversations."""
    return f"sqlite:///{_data_dir() / 'demo.db'}"


_DATA_DIR_VARIABLES = ("XDG_DATA_HOME", "HOME", "USERPROFILE", "APPDATA", "LOCALAPPDATA")
"""What platformdirs derives the user's data directory from, on any platform."""


def _data_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME))


def default_config_path() -> Path:
    env = os.environ.get("TURNKEEPER_CONFIG")
    if env:
        return Path(env)
    return Path(platformdirs.user_config_dir(APP_NAME)) / "turnkeeper.toml"


class Settings(BaseSettings):
    """Everything configurable. Invalid values fail at start-up with the key named."""

    model_config = SettingsConfigDict(
        env_prefix="TURNKEEPER_",
        extra="forbid",
        populate_by_name=True,
        validate_default=True,
    )

    database_url: str = Field(
        default_factory=default_database_url,
        description="Where sessions live: sqlite:///path/to/file.db (the default is in the "
        "user's data directory).",
    )
    sqlite_synchronous: str = Field(
        default="NORMAL",
        description="SQLite `synchronous` pragma (the database is always in WAL mode): NORMAL "
        "(the default: never corrupts, and survives a crash of the process, but a power loss or "
        "OS crash may undo the last commits) or FULL (every commit is on the disk before it "
        "returns, at the cost of an fsync per write).",
    )
    sqlite_writer_lock_file: bool = Field(
        default=False,
        description="Writers in several processes on one SQLite file also take turns at a lock "
        "file beside it (`<db>-writers.lock`), instead of meeting in SQLite's sleeping busy "
        "handler: a shorter tail for `turnkeeper serve --workers N`, which turns it on.",
    )
    default_project: str = Field(default="default", min_length=1, max_length=200)
    postgres_pool_size: int = Field(
        default=8, gt=0, description="Most PostgreSQL connections one process keeps open."
    )
    postgres_acquire_timeout: timedelta = Field(
        default=timedelta(seconds=2),
        description="How long a request waits for a pooled PostgreSQL connection before it "
        "fails with 503 (while the database is down, this is how fast requests fail).",
    )
    postgres_connect_timeout: timedelta = Field(
        default=timedelta(seconds=2),
        description="How long one attempt to open a PostgreSQL connection may take (whole "
        "seconds, at least 2: libpq's unit and minimum).",
    )
    postgres_statement_timeout: timedelta = Field(
        default=timedelta(seconds=5),
        gt=timedelta(0),
        description="Longest one SQL statement may run on PostgreSQL (its `statement_timeout`, "
        "set on every connection): past it the server cancels the statement and the request "
        "fails with 503. Searches have their own, `search_timeout`; migrations and expiry "
        "sweeps run without one.",
    )
    postgres_socket_timeout: timedelta = Field(
        default=timedelta(seconds=6),
        gt=timedelta(0),
        description="Longest turnkeeper waits for PostgreSQL to answer a statement (and, as "
        "libpq's `tcp_user_timeout`, for the network to deliver it) before it drops the "
        "connection and the request fails with 503: a frozen or cut-off server costs a "
        "request no more. Never less than 1 s beyond the statement's own timeout.",
    )
    search_timeout: timedelta = Field(
        default=timedelta(seconds=3),
        gt=timedelta(0),
        description="Longest one full-text search may run (PostgreSQL: its statement timeout; "
        "SQLite: interrupted). Past it the search fails with 422 asking for a narrower query.",
    )
    search_concurrency: int = Field(
        default=2,
        gt=0,
        description="Searches one API key may run at once in one `turnkeeper serve` process "
        "(REST, UI and MCP together); more get 429 with `Retry-After`.",
    )
    redis_url: str | None = Field(
        default=None,
        description="Optional shared cache, e.g. redis://127.0.0.1:6379/0. Never needed for "
        "correctness: when Redis is down or slow, reads go to the database.",
    )
    redis_timeout: timedelta = Field(
        default=timedelta(milliseconds=100),
        description="Socket timeout of each Redis call; past it the call is bypassed.",
    )
    cache_ttl: timedelta = Field(
        default=timedelta(seconds=120), description="Lifetime of a Redis cache entry."
    )
    lru_size: int = Field(
        default=100, ge=0, description="Sessions the in-process cache keeps; 0: off."
    )
    api_key_cache: timedelta = Field(
        default=timedelta(seconds=5),
        description="How long the service trusts an API key it verified without reading the "
        "store again (at most 1,024 keys; 0: off). A revocation through the same process "
        "applies at once; one made by another replica or the CLI, within this time.",
    )
    lru_max_bytes: int = Field(
        default=64 * 1024 * 1024,
        gt=0,
        description="Most bytes of messages the in-process cache holds, whatever `lru_size` "
        "allows (least recently used sessions are dropped first).",
    )

    encryption_key: str | None = Field(
        default=None,
        repr=False,
        description="Encrypt what users wrote at rest (docs/privacy.md): master keys as "
        "`id:base64key`, comma-separated (each key 32 random bytes, e.g. from `turnkeeper "
        "encryption generate-key`). The first wraps new sessions' data keys; the others still read the "
        "sessions they wrapped, so a key is rotated by putting a new one first. Unset (the "
        "default): nothing is encrypted.",
    )
    encryption_key_file: Path | None = Field(
        default=None,
        description="A file holding `encryption_key`'s value (e.g. a mounted secret), read at "
        "open; not both.",
    )
    key_store: str | None = Field(
        default=None,
        description="Where the sessions' wrapped data keys live, apart from the data (deleting "
        "a session deletes its key there: crypto-shredding): sqlite:///path or a PostgreSQL "
        "URL. Unset: `<database file>.keys` beside a SQLite database; a PostgreSQL database "
        "needs it set.",
    )

    session_expiration: timedelta | None = Field(
        default=None,
        description="How long a session lives without activity, e.g. 30d (counted from its "
        "last append; from its creation when `sliding_expiry` is off). Unset, 0 or never "
        "(the default): sessions never expire.",
    )
    cleanup_interval: timedelta = Field(
        default=timedelta(hours=1), description="How often the service's sweeper runs expiry."
    )
    expiry_grace: timedelta = Field(
        default=timedelta(0),
        description="How long an expired session is kept before gc deletes it.",
    )
    archive_dir: Path | None = Field(
        default=None,
        description="Where gc and the sweeper write the sessions they delete (expired, or past "
        "their retention) as JSONL, readable by `turnkeeper import`, before deleting them. "
        "Unset: they are deleted unarchived.",
    )
    retention: timedelta | None = Field(
        default=None,
        description="How long a session is kept after its last change (`updated_at`: an "
        "append, an edit, a status change), whatever its status: the sweeper and gc delete "
        "older sessions whole, archiving them first when `archive_dir` is set; a legal hold "
        "keeps them. Unset, 0 or never (the default): kept for ever.",
    )
    project_retention: Annotated[dict[str, timedelta | None], NoDecode] = Field(
        default_factory=dict,
        description="`retention` per project, overriding it: a TOML table (`[turnkeeper."
        'project_retention]`, `support = "30d"`) or, in the environment, `project=duration` '
        "pairs separated by commas (`support=30d,legal=never`); `never` keeps a project's "
        "sessions for ever whatever `retention` says.",
    )
    sliding_expiry: bool = Field(
        default=True,
        description="Each append moves expires_at to now + session_expiration (if later), so "
        "a conversation in use never expires. False: a session expires session_expiration "
        "after its creation, however active.",
    )

    strategy: StrategyName = Field(
        default=StrategyName.SLIDING_WINDOW,
        validation_alias=AliasChoices("strategy", "token_strategy", "context_strategy"),
        description="Default context strategy.",
    )
    budget_tokens: int | None = Field(
        default=None,
        gt=0,
        description="Default token budget of a built context window. Unset: budget_ratio × the "
        "model's context window. (`max_tokens` is its old name, still read.)",
    )
    budget_ratio: float = Field(default=0.8, gt=0, le=1)
    default_context_window: int = Field(
        default=128_000, gt=0, description="Context window assumed for an unknown model."
    )
    max_context_tokens: int = Field(
        default=6000, gt=0, description="Budget of the `truncate` strategy."
    )
    reserved_tokens: int = Field(
        default=4500,
        ge=0,
        description="Tokens `truncate` keeps free for system prompt, tools and reply.",
    )
    max_history_messages: int = Field(
        default=50, gt=0, description="Most messages `truncate` loads."
    )
    keep_recent_messages: int = Field(
        default=10,
        gt=0,
        description="N of `recent` and K (verbatim tail) of `summarize`.",
    )
    window_cut: CutMode = Field(
        default=CutMode.STABLE,
        description="Where sliding_window, truncate and summarize start a window: `stable` holds "
        "the session's cut point until the window overflows (the prefix stays cacheable), "
        "`slide` takes the oldest turn that fits at every build.",
    )
    cut_high_watermark: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="A held cut point moves once the window from it would fill more than this "
        "share of the budget (and of a strategy's message limit).",
    )
    cut_low_watermark: float = Field(
        default=0.5,
        gt=0,
        lt=1,
        description="When a cut point moves, the window from its new place fills at most this "
        "share of the budget (the rest is free for the turns to come).",
    )
    model: str = Field(default="gpt-4o", min_length=1, description="Default model name.")
    token_encoding: str = Field(
        default="o200k_base",
        description="Encoding used to count stored messages (o200k_base, cl100k_base, or "
        "approx_chars4). Fixed per database when it is created.",
    )
    max_message_bytes: int = Field(
        default=1024 * 1024, gt=0, description="Largest message content accepted (UTF-8 bytes)."
    )
    max_json_bytes: int = Field(
        default=8 * 1024 * 1024,
        gt=0,
        description="Largest JSON value accepted (a session's or message's metadata, a "
        "message's tool calls), as compact UTF-8 JSON; the default is the HTTP body limit's, "
        "so what one request can carry, every interface takes. Values also nest at most 64 "
        "levels of objects and arrays.",
    )

    # -- the HTTP service (`turnkeeper serve`) ---------------------------------------------
    host: str = Field(default="127.0.0.1", description="Address `turnkeeper serve` binds to.")
    port: int = Field(default=8000, ge=0, le=65535, description="Port `turnkeeper serve` uses.")
    auth: bool = Field(
        default=True,
        description="Require `Authorization: Bearer <API key>` on every request. Off only "
        "explicitly (`--no-auth`), and then the server binds to loopback only.",
    )
    max_request_bytes: int = Field(
        default=8 * 1024 * 1024,
        gt=0,
        description="Largest HTTP request body accepted (413 beyond it).",
    )
    allowed_hosts: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="Host names the service answers to besides the loopback ones (localhost, "
        "*.localhost, 127.0.0.1, [::1]), comma-separated in the environment. Without API keys "
        "(`--no-auth`) a request naming any other host in its Host header is refused (421), so "
        "a web page cannot reach the service through DNS rebinding; with keys, the check "
        "applies only when this is set.",
    )
    http_header_timeout: timedelta = Field(
        default=timedelta(seconds=10),
        description="How long a client may take to send a request's line and headers, from "
        "the moment it connects (or starts its next request on a kept-alive connection); past "
        "it the connection is closed.",
    )
    http_body_timeout: timedelta = Field(
        default=timedelta(seconds=60),
        description="How long a client may take to send a request's body, from the end of its "
        "headers; past it the connection is closed.",
    )
    http_keep_alive_timeout: timedelta = Field(
        default=timedelta(seconds=75),
        description="How long an idle connection is kept open for the client's next request "
        "(longer than the usual client pool's idle time, so a client reusing a connection does "
        "not race the server closing it).",
    )
    server_threads: int = Field(
        default=40,
        gt=0,
        le=1000,
        description="Requests the HTTP service works on at once (its thread pool); more wait.",
    )
    malloc_arenas: int = Field(
        default=2,
        ge=0,
        description="Cap on glibc's malloc arenas in `turnkeeper serve` (like MALLOC_ARENA_MAX; "
        "0: glibc's default of 8 per core). Bounds the memory request threads keep.",
    )
    llm_base_url: str = Field(
        default="https://api.openai.com/v1",
        description="Base URL of the OpenAI-compatible endpoint the /chat turn and the proxy "
        "call (OpenAI, vLLM, Ollama, llama.cpp server, ...).",
    )
    llm_model: str | None = Field(
        default=None, description="Model the /chat turn asks for (default: `model`)."
    )
    llm_api_key: str | None = Field(
        default=None, description="Bearer key sent to the upstream model endpoint.", repr=False
    )
    anthropic_base_url: str = Field(
        default="https://api.anthropic.com",
        description="Base URL of the Anthropic Messages API `POST /v1/messages` forwards to "
        "(without the `/v1`; `ANTHROPIC_BASE_URL` when unset).",
    )
    anthropic_api_key: str | None = Field(
        default=None,
        description="Key sent to the Anthropic upstream (`x-api-key`; `ANTHROPIC_API_KEY` when "
        "unset).",
        repr=False,
    )
    llm_timeout: timedelta = Field(
        default=timedelta(seconds=60),
        description="How long to wait for the upstream model (connect, and between bytes).",
    )
    llm_max_retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Times an upstream 429 or 5xx (or a refused connection) is retried, with "
        "exponential backoff, before the client gets the error.",
    )
    llm_retry_backoff: timedelta = Field(
        default=timedelta(milliseconds=500),
        description="Wait before the first upstream retry; doubled for each next one. An "
        "upstream `Retry-After` (up to `llm_timeout`) is waited instead.",
    )
    turn_lease: timedelta = Field(
        default=timedelta(seconds=10),
        description="How long a chat turn's model call holds the turn without a sign of life "
        "(renewed every third of it while it runs). A retry arriving meanwhile waits for its "
        "answer; once the lease lapses (its process died or hangs) the retry takes the turn over.",
    )
    summary_model: str | None = Field(
        default=None,
        description="Fast model that writes summaries on the LLM endpoint. Unset: the offline "
        "extractive summarizer.",
    )
    summary_prompt: str = Field(
        default=DEFAULT_SUMMARY_PROMPT,
        min_length=1,
        description="System prompt of the LLM summarizer (default: the anonymous chat planner's).",
    )
    summary_threshold: int = Field(
        default=15,
        gt=0,
        description="Messages above which the conversation context object carries a summary.",
    )

    _conventional: dict[str, str] = PrivateAttr(default_factory=dict)
    """The settings taken from a provider's own variable, and the variable's name."""

    @model_validator(mode="after")
    def _watermarks_in_order(self) -> Settings:
        """A cut point that moved must have room to stay put: low below high."""
        if self.cut_low_watermark >= self.cut_high_watermark:
            raise ValueError(
                f"cut_low_watermark ({self.cut_low_watermark}) must be below "
                f"cut_high_watermark ({self.cut_high_watermark})"
            )
        return self

    @model_validator(mode="after")
    def _provider_variables(self) -> Settings:
        """Fill an upstream's URL and key from its provider's variables, by the rules of
        `PROVIDER_VARIABLES`. Only what no source of turnkeeper's own set is filled."""
        for provider in PROVIDER_VARIABLES:
            for field, variable in provider.fill(self.model_fields_set, self.__dict__, os.environ):
                setattr(self, field, os.environ[variable])
                self._conventional[field] = variable
        return self

    def configured(self, provider: ProviderVariables) -> bool:
        """Whether this upstream is to be called: always for one that is not optional; for an
        optional one (Anthropic), once its key or its URL is given (setting or variable)."""
        return (
            not provider.optional
            or getattr(self, provider.key_field) is not None
            or provider.url_field in (self.model_fields_set | self._conventional.keys())
        )

    def upstreams(self) -> list[str]:
        """What `turnkeeper serve` says it will call: each upstream's URL and where its key
        came from (never the key)."""
        lines = []
        for provider in PROVIDER_VARIABLES:
            url, key = getattr(self, provider.url_field), getattr(self, provider.key_field)
            if not self.configured(provider):
                lines.append(f"{provider.name}: not configured (set {provider.key_variable})")
                continue
            if key is None:
                source = "no key"
            elif provider.key_field in self._conventional:
                source = f"key from {self._conventional[provider.key_field]}"
            else:
                source = f"key from the {provider.key_field} setting"
            lines.append(f"{provider.name}: {url} ({source})")
        return lines

    @field_validator("strategy", mode="before")
    @classmethod
    def _strategy_alias(cls, value: Any) -> Any:
        if isinstance(value, str):
            return _STRATEGY_ALIASES.get(value, value)
        return value

    @field_validator("session_expiration", mode="before")
    @classmethod
    def _never(cls, value: Any) -> Any:
        if value in (0, "0", "never", "none", ""):
            return None
        return parse_duration(value)

    @field_validator("retention", mode="before")
    @classmethod
    def _retention(cls, value: Any) -> Any:
        return _retention_duration(value)

    @field_validator("retention")
    @classmethod
    def _retention_positive(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value <= timedelta(0):
            raise ValueError("must be a duration longer than 0 (or never)")
        return value

    @field_validator("project_retention", mode="before")
    @classmethod
    def _project_retention(cls, value: Any) -> Any:
        """`project=duration` pairs (the environment's form) or a table, every project's
        name checked as the API checks it and every duration positive (or `never`)."""
        if isinstance(value, str):
            pairs: dict[str, Any] = {}
            for part in (p.strip() for p in value.split(",")):
                if not part:
                    continue
                name, equals, duration = part.partition("=")
                if not equals:
                    raise ValueError(f"{part!r} is not project=duration (e.g. support=30d)")
                pairs[name.strip()] = duration.strip()
            value = pairs
        if not isinstance(value, Mapping):
            raise ValueError("must map projects to durations, e.g. support=30d,legal=never")
        checked: dict[str, timedelta | None] = {}
        for name, duration in value.items():
            if not isinstance(name, str) or not _PROJECT_NAME.match(name):
                raise ValueError(
                    f"{name!r} is not a project name (1-255 letters, digits or "
                    ". _ : @ / + = ~ -, starting with a letter or digit)"
                )
            parsed = _retention_duration(duration)
            if parsed is not None and not isinstance(parsed, timedelta):
                raise ValueError(
                    f"{name}: {duration!r} is not a positive duration (e.g. 30d, or never)"
                )
            if parsed is not None and parsed <= timedelta(0):
                raise ValueError(f"{name}: must be a duration longer than 0 (or never)")
            checked[name] = parsed
        return checked

    def retention_for(self, project: str) -> timedelta | None:
        """How long `project`'s sessions are kept after their last change (None: for ever):
        its `project_retention`, else `retention`."""
        if project in self.project_retention:
            return self.project_retention[project]
        return self.retention

    @property
    def retains(self) -> bool:
        """Whether any project's sessions have a retention (the sweeper and gc apply it)."""
        return self.retention is not None or any(
            limit is not None for limit in self.project_retention.values()
        )

    @field_validator(
        "cleanup_interval",
        "expiry_grace",
        "llm_timeout",
        "llm_retry_backoff",
        "turn_lease",
        "redis_timeout",
        "cache_ttl",
        "postgres_acquire_timeout",
        "postgres_connect_timeout",
        "http_header_timeout",
        "http_body_timeout",
        "http_keep_alive_timeout",
        "postgres_statement_timeout",
        "postgres_socket_timeout",
        "search_timeout",
        mode="before",
    )
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return parse_duration(value)

    @field_validator("http_header_timeout", "http_body_timeout", "http_keep_alive_timeout")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be longer than 0 seconds")
        return value

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _host_list(cls, value: Any) -> Any:
        """A comma-separated string (the environment's form) or a list of names."""
        if isinstance(value, str):
            return tuple(part for part in value.split(",") if part.strip())
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        names = []
        for raw in value:
            name = raw.strip().lower().rstrip(".")
            if not _HOST_NAME.match(name):
                raise ValueError(
                    f"{raw!r} is not a host name (give names like memory.internal or "
                    "[fd00::1], without a scheme, port or path)"
                )
            names.append(name)
        return tuple(names)

    @field_validator("api_key_cache", mode="before")
    @classmethod
    def _off_or_duration(cls, value: Any) -> Any:
        if value in (0, "0", "off", ""):
            return timedelta(0)
        return parse_duration(value)

    @field_validator("sqlite_synchronous")
    @classmethod
    def _synchronous(cls, value: str) -> str:
        upper = value.upper()
        if upper not in {"FULL", "NORMAL", "EXTRA", "OFF"}:
            raise ValueError("must be FULL, NORMAL, EXTRA or OFF")
        return upper

    @field_validator("token_encoding")
    @classmethod
    def _encoding(cls, value: str) -> str:
        if value not in (*EXACT_ENCODINGS, APPROX_ENCODING):
            raise ValueError(f"must be one of {', '.join((*EXACT_ENCODINGS, APPROX_ENCODING))}")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _OldEnvNames(settings_cls), _TomlSource(settings_cls))


@dataclass(frozen=True)
class ProviderVariables:
    """A model provider's conventional variables and the settings they stand in for.

    The URL variable is used when neither the URL setting nor the key setting was given (a key
    configured for turnkeeper is never sent somewhere else). The key variable is used when the
    key setting was not given and the URL is the provider's variable's, the provider's own
    (`home`), or the default: a key for OpenAI is never sent to a local server that
    `llm_base_url` names."""

    name: str
    url_field: str
    key_field: str
    url_variable: str
    key_variable: str
    home: str
    optional: bool = False

    def fill(
        self, given: set[str], values: dict[str, Any], environ: Mapping[str, str]
    ) -> list[tuple[str, str]]:
        """The `(setting, variable)` pairs to fill from the environment."""
        filled = []
        url_given, key_given = self.url_field in given, self.key_field in given
        if not url_given and not key_given and environ.get(self.url_variable):
            filled.append((self.url_field, self.url_variable))
        url = str(values[self.url_field]).rstrip("/")
        own_url = (
            not url_given
            or urlsplit(url).hostname == self.home
            or url == environ.get(self.url_variable, "").rstrip("/")
        )
        if not key_given and own_url and environ.get(self.key_variable):
            filled.append((self.key_field, self.key_variable))
        return filled


OPENAI_VARIABLES = ProviderVariables(
    "OpenAI-compatible upstream", "llm_base_url", "llm_api_key",
    "OPENAI_BASE_URL", "OPENAI_API_KEY", "api.openai.com",
)  # fmt: skip
ANTHROPIC_VARIABLES = ProviderVariables(
    "Anthropic upstream", "anthropic_base_url", "anthropic_api_key",
    "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "api.anthropic.com", optional=True,
)  # fmt: skip
PROVIDER_VARIABLES = (OPENAI_VARIABLES, ANTHROPIC_VARIABLES)
"""The providers whose own variables turnkeeper reads, below its own settings."""


OLD_NAMES = {"max_tokens": "budget_tokens"}
"""Keys renamed since, still read under their old names (as arguments, `TURNKEEPER_` + the old
name, or in the config file) when the new name is not given at the same level. Not aliases of
the fields: an alias is also read from the bare variable (`MAX_TOKENS`), which many LLM
programs set to the reply's limit."""


def _new_names(values: dict[str, Any]) -> dict[str, Any]:
    renamed = dict(values)
    for old, new in OLD_NAMES.items():
        if old in renamed:
            value = renamed.pop(old)
            renamed.setdefault(new, value)
    return renamed


class _OldEnvNames(PydanticBaseSettingsSource):
    """`TURNKEEPER_<old name>` variables, below the current names' and above the file."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return {
            new: os.environ[f"TURNKEEPER_{old.upper()}"]
            for old, new in OLD_NAMES.items()
            if f"TURNKEEPER_{old.upper()}" in os.environ
        }


class _TomlSource(PydanticBaseSettingsSource):
    """Reads the TOML config file (top level or `[turnkeeper]` table)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = default_config_path()
        if not path.is_file():
            return {}
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise InvalidConfig(str(path), f"cannot read config file: {exc}") from exc
        section = data.get("turnkeeper", data)
        if not isinstance(section, dict):
            raise InvalidConfig(str(path), "[turnkeeper] must be a table")
        return _new_names(section)


_LOADED: dict[Hashable, Settings] = {}
"""Settings already built, by everything they were built from (see `_sources_key`)."""
_LOADED_MAX = 64


@functools.lru_cache(maxsize=8)
def _config_path_in(environment: Hashable) -> Path:
    """`default_config_path()` in the environment `environment` is a snapshot of (the current
    one): it derives from the environment alone, so it is worked out once per environment."""
    return default_config_path()


def _sources_key(clean: dict[str, Any]) -> Hashable | None:
    """Everything a `Settings` is built from: the overrides, the whole environment (settings
    read unprefixed aliases too, in any case, so no variable can be left out) and the config
    file's identity (path, size, modification time). None when an override is not
    hashable."""
    environment = _speedups.environment_snapshot()
    path = _config_path_in(environment)
    try:
        stat = path.stat()
        file: tuple[Any, ...] = (path, stat.st_size, stat.st_mtime_ns)
    except OSError:
        file = (path,)
    try:
        return (environment, frozenset(clean.items()), file)
    except TypeError:  # an override that is a list, say
        return None


def load_settings(**overrides: Any) -> Settings:
    """Build the settings, turning validation errors into `InvalidConfig` naming the key.

    Settings built from the same overrides, environment and config file are built once per
    process (pydantic-settings would otherwise do most of a `turnkeeper.open()`'s work
    again); each caller gets its own copy."""
    clean = _new_names({name: value for name, value in overrides.items() if value is not None})
    key = _sources_key(clean)
    loaded = _LOADED.get(key) if key is not None else None
    if loaded is not None:
        return loaded.model_copy()
    try:
        settings = Settings(**clean)
        if key is not None:
            if len(_LOADED) >= _LOADED_MAX:
                _LOADED.clear()
            _LOADED[key] = settings.model_copy()
        return settings
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"]) or "settings"
        raise InvalidConfig(key, f"{first['msg']} (got {first.get('input')!r})") from None
