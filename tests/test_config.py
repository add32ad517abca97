"""Settings come from arguments, TURNKEEPER_* variables, a TOML file and defaults, in that
order, and invalid values fail at start-up naming the key."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import pytest

import turnkeeper
from turnkeeper.config import default_database_url, demo_database_url, load_settings
from turnkeeper.errors import InvalidConfig
from turnkeeper.types import StrategyName


def test_defaults_keep_conversations_and_follow_the_older_designs_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = load_settings()
    assert settings.session_expiration is None  # conversations are kept until deleted
    assert settings.sliding_expiry  # a configured lifetime counts from the last activity
    assert settings.cleanup_interval == timedelta(hours=1)
    assert settings.strategy is StrategyName.SLIDING_WINDOW
    assert settings.keep_recent_messages == 10
    assert (settings.max_history_messages, settings.max_context_tokens) == (50, 6000)
    assert settings.reserved_tokens == 4500
    assert settings.database_url.startswith("sqlite:///") and "turnkeeper" in settings.database_url


def test_toml_file_env_and_arguments_take_precedence_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "turnkeeper.toml"
    config.write_text(
        '[turnkeeper]\ntoken_strategy = "summarization"\nsession_expiration = "2h"\n'
        "keep_recent_messages = 4\nbudget_tokens = 100000\n"
    )
    monkeypatch.setenv("TURNKEEPER_CONFIG", str(config))
    settings = load_settings()
    assert settings.strategy is StrategyName.SUMMARIZE
    assert settings.session_expiration == timedelta(hours=2)
    assert (settings.keep_recent_messages, settings.budget_tokens) == (4, 100000)
    monkeypatch.setenv("TURNKEEPER_KEEP_RECENT_MESSAGES", "7")
    assert load_settings().keep_recent_messages == 7
    assert load_settings(keep_recent_messages=9).keep_recent_messages == 9


@pytest.mark.parametrize(
    ("env", "value", "key"),
    [
        ("TURNKEEPER_BUDGET_TOKENS", "-5", "budget_tokens"),
        ("TURNKEEPER_MAX_TOKENS", "-5", "budget_tokens"),
        ("TURNKEEPER_STRATEGY", "psychic", "strategy"),
        ("TURNKEEPER_SESSION_EXPIRATION", "soon", "session_expiration"),
        ("TURNKEEPER_TOKEN_ENCODING", "p50k_base", "token_encoding"),
        ("TURNKEEPER_BUDGET_RATIO", "1.5", "budget_ratio"),
        ("TURNKEEPER_SQLITE_SYNCHRONOUS", "SOMETIMES", "sqlite_synchronous"),
        ("TURNKEEPER_ALLOWED_HOSTS", "http://memory.internal", "allowed_hosts"),
        ("TURNKEEPER_ALLOWED_HOSTS", "memory.internal:8000", "allowed_hosts"),
        ("TURNKEEPER_HTTP_HEADER_TIMEOUT", "0", "http_header_timeout"),
        ("TURNKEEPER_HTTP_BODY_TIMEOUT", "-1", "http_body_timeout"),
        ("TURNKEEPER_HTTP_KEEP_ALIVE_TIMEOUT", "soon", "http_keep_alive_timeout"),
        ("TURNKEEPER_RETENTION", "-3d", "retention"),
        ("TURNKEEPER_RETENTION", "-60", "retention"),
        ("TURNKEEPER_RETENTION", "a while", "retention"),
        ("TURNKEEPER_PROJECT_RETENTION", "support=-1h", "project_retention"),
        ("TURNKEEPER_PROJECT_RETENTION", "support=soon", "project_retention"),
        ("TURNKEEPER_PROJECT_RETENTION", "../escape=30d", "project_retention"),
        ("TURNKEEPER_PROJECT_RETENTION", "support", "project_retention"),
    ],
)
def test_invalid_value_fails_naming_the_key(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, key: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(InvalidConfig) as info:
        load_settings()
    assert info.value.field == key


def test_allowed_hosts_are_a_comma_separated_list_in_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TURNKEEPER_ALLOWED_HOSTS", "Memory.Internal, tk.example.,[fd00::1]")
    assert load_settings().allowed_hosts == ("memory.internal", "tk.example", "[fd00::1]")
    assert load_settings(allowed_hosts=["a.example"]).allowed_hosts == ("a.example",)


def test_unknown_key_in_the_config_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "turnkeeper.toml"
    config.write_text("max_tokenz = 5\n")
    monkeypatch.setenv("TURNKEEPER_CONFIG", str(config))
    with pytest.raises(InvalidConfig, match="max_tokenz"):
        load_settings()


def test_the_window_budget_keeps_its_old_name_max_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "turnkeeper.toml"
    config.write_text("max_tokens = 3000\n")  # a config file written for the old name
    monkeypatch.setenv("TURNKEEPER_CONFIG", str(config))
    assert load_settings().budget_tokens == 3000
    monkeypatch.setenv("TURNKEEPER_MAX_TOKENS", "4000")  # the environment beats the file
    assert load_settings().budget_tokens == 4000
    monkeypatch.setenv("TURNKEEPER_BUDGET_TOKENS", "5000")  # the new name beats the old
    assert load_settings().budget_tokens == 5000
    assert load_settings(budget_tokens=6000).budget_tokens == 6000


def test_a_bare_max_tokens_variable_is_not_the_window_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MAX_TOKENS", "256")  # many LLM programs: the reply's limit
    assert load_settings().budget_tokens is None


def test_never_disables_expiry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TURNKEEPER_SESSION_EXPIRATION", "24h")
    assert load_settings().session_expiration == timedelta(hours=24)
    monkeypatch.setenv("TURNKEEPER_SESSION_EXPIRATION", "never")
    assert load_settings().session_expiration is None


def test_retention_is_kept_for_ever_unless_set_and_a_project_may_override_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert load_settings().retention is None and not load_settings().retains
    config = tmp_path / "turnkeeper.toml"
    config.write_text(
        '[turnkeeper]\nretention = "90d"\n'
        '[turnkeeper.project_retention]\nsupport = "7d"\n"legal/eu" = "never"\n'
    )
    monkeypatch.setenv("TURNKEEPER_CONFIG", str(config))
    settings = load_settings()
    assert settings.retains
    assert settings.retention_for("support") == timedelta(days=7)
    assert settings.retention_for("legal/eu") is None  # never, whatever retention says
    assert settings.retention_for("other") == timedelta(days=90)
    monkeypatch.setenv("TURNKEEPER_PROJECT_RETENTION", " support=1h30m , trials=2d ")
    monkeypatch.setenv("TURNKEEPER_RETENTION", "never")
    settings = load_settings()  # the environment beats the file, table and all
    assert settings.project_retention == {
        "support": timedelta(hours=1, minutes=30),
        "trials": timedelta(days=2),
    }
    assert settings.retention_for("other") is None
    monkeypatch.setenv("TURNKEEPER_PROJECT_RETENTION", "support=never")
    assert not load_settings(retention=0).retains


def test_settings_built_before_follow_a_changed_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Settings are remembered per environment; an unprefixed alias (any case) counts too."""
    monkeypatch.setenv("TURNKEEPER_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.delenv("TOKEN_STRATEGY", raising=False)
    assert load_settings().strategy is StrategyName.SLIDING_WINDOW
    monkeypatch.setenv("token_strategy", "recent")
    assert load_settings().strategy is StrategyName.RECENT
    monkeypatch.delenv("token_strategy")
    assert load_settings().strategy is StrategyName.SLIDING_WINDOW


def test_default_database_follows_the_data_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The data directory is remembered per the variables it comes from, not once for all."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "one"))
    first = default_database_url()
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "two"))
    second = default_database_url()
    if sys.platform.startswith("linux"):
        assert str(tmp_path / "one") in first
        assert str(tmp_path / "two") in second
    assert demo_database_url() != second


def test_open_makes_the_default_data_directory_and_refuses_a_missing_one_elsewhere(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Only the default database's directory is made on first use; any other missing
    directory is a typo, reported before anything is written."""
    if sys.platform == "win32":
        pytest.skip("the data directory comes from the shell there, not the environment")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TURNKEEPER_CONFIG", str(tmp_path / "none.toml"))
    default = default_database_url()
    with turnkeeper.open(default) as tk:
        tk.create_session(key="first")
    assert Path(default.removeprefix("sqlite:///")).is_file()
    with pytest.raises(InvalidConfig, match="does not exist"):
        turnkeeper.open(f"sqlite:///{tmp_path / 'typo' / 'tk.db'}")
    assert not (tmp_path / "typo").exists()
