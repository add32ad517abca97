"""The generated reference pages of the documentation site (scripts/docs_reference.py, run by
mkdocs at every build): every visible command's help, every route of the OpenAPI schema, and
nothing the help hides."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "docs_reference", ROOT / "scripts" / "docs_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_has_each_commands_help_and_no_hidden_alias() -> None:
    page = _generator().cli_page()
    sections = [line for line in page.splitlines() if line.startswith("## ")]
    assert "## `turnkeeper sessions create`" in sections
    assert "## `turnkeeper keys revoke`" in sections
    assert len(sections) >= 30
    assert "Usage: turnkeeper import [OPTIONS] [FILE|DIR]" in page
    assert "session-files" in page and "dagent" not in page


def test_the_http_reference_lists_every_route_and_links_the_schema() -> None:
    generator = _generator()
    schema = generator.openapi_schema()
    page = generator.http_page(schema)
    assert "[openapi.json](openapi.json)" in page
    for path, operations in schema["paths"].items():
        if not path.startswith("/api/v1/"):
            assert all(f"| {method.upper()} | `{path}` |" in page for method in operations)
    older = [path for path in schema["paths"] if path.startswith("/api/v1/")]
    assert ("Routes of older clients" in page) == bool(older)
    assert "/api/v1/conversations" not in page


def test_the_benchmarks_page_holds_each_scripts_block_once_opened_and_closed() -> None:
    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    opened = re.findall(r"<!-- bench:([\w-]+) -->", text)
    closed = re.findall(r"<!-- /bench:([\w-]+) -->", text)
    assert opened == closed and len(set(opened)) == len(opened)
    for name in ("sqlite", "http", "shared", "replicas", "outage", "async", "search-load"):
        assert name in opened
