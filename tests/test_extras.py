"""What a plain `pip install turnkeeper` (no extras) gives: a working library, and commands
that name the extra they need instead of failing on an import.

Each case runs in a fresh interpreter where the extras' packages cannot be imported, as they
would be missing after a plain install.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

EXTRAS_ONLY = {
    "typer", "click", "rich", "httpx", "fastapi", "uvicorn", "structlog", "prometheus_client",
    "jinja2", "redis", "psycopg", "psycopg_pool", "agents", "langchain_core", "bpe_openai", "mcp",
}  # fmt: skip


@pytest.fixture
def env() -> dict[str, str]:
    values = {key: value for key, value in os.environ.items() if not key.startswith("TURNKEEPER_")}
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), values.get("PYTHONPATH")]))
    return values | {"PYTHONPATH": path, "TURNKEEPER_CONFIG": os.devnull}


def _without(modules: set[str], *args: str) -> list[str]:
    """The `turnkeeper` command in a Python where `modules` cannot be imported."""
    code = f"import sys; sys.modules.update(dict.fromkeys({sorted(modules)!r})); " + (
        "from turnkeeper.cli import main; sys.argv[0] = 'turnkeeper'; main()"
    )
    return [sys.executable, "-c", code, *args]


def _run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)


def test_the_command_line_without_its_extra_says_what_to_install(env: dict[str, str]) -> None:
    result = _run(_without({"typer", "rich", "click"}, "sessions", "list"), env)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: the turnkeeper command line is not installed: pip install 'turnkeeper[cli]'"
    ]


def test_serve_without_the_server_extra_says_what_to_install(env: dict[str, str]) -> None:
    result = _run(_without({"uvicorn", "fastapi"}, "serve", "--no-auth"), env)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: the HTTP service is not installed: pip install 'turnkeeper[server]'"
    ]


def test_mcp_without_its_extra_says_what_to_install(env: dict[str, str]) -> None:
    result = _run(_without({"mcp"}, "mcp"), env)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: the MCP server is not installed: pip install 'turnkeeper[mcp]'"
    ]


def test_the_service_runs_without_the_mcp_extra_and_has_no_mcp_route(
    env: dict[str, str], tmp_path: Path
) -> None:
    program = (
        "import sys; sys.modules['mcp'] = None\n"
        "from turnkeeper.config import load_settings\n"
        "from turnkeeper.server import create_app\n"
        f"app = create_app(load_settings(database_url='sqlite:///{tmp_path / 's.db'}'))\n"
        "print(sorted({getattr(r, 'path', '') for r in app.routes} & {'/mcp', '/openapi.json'}))\n"
    )
    result = _run([sys.executable, "-c", program], env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["['/openapi.json']"]


def test_the_core_works_without_any_extra(env: dict[str, str], tmp_path: Path) -> None:
    extras = sorted(EXTRAS_ONLY)
    program = (
        f"import sys; sys.modules.update(dict.fromkeys({extras!r}))\n"
        "import turnkeeper\n"
        f"with turnkeeper.open('sqlite:///{tmp_path / 'core.db'}') as tk:\n"
        "    session, _ = tk.get_or_create_session('k')\n"
        "    tk.append(session, 'user', 'hello')\n"
        "    print(len(tk.context(session, strategy='summarize').messages))\n"
        "try:\n"
        f"    turnkeeper.open('sqlite:///{tmp_path / 'llm.db'}', summary_model='m')\n"
        "except turnkeeper.InvalidConfig as exc:\n"
        "    print(exc)\n"
    )
    result = _run([sys.executable, "-c", program], env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "1",
        "llm_base_url: talking to a model needs httpx: pip install 'turnkeeper[llm]'",
    ]
