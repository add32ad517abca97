"""Interfaces apart: the command line, MCP and HTTP each depend on the service, never on one
another, and nothing below them imports any of them. Every module under src/turnkeeper is read
with `ast` (nothing imported) by `scripts/import_graph.py`, which holds the rule."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "import_graph.py"
INTERFACES = ("cli", "mcp", "server")


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def _edges() -> list[tuple[str, str, str]]:
    """Every import between turnkeeper modules: (importer, imported, kind)."""
    graph, _ = _script().check()
    return [(e.source, e.target, e.kind) for edges in graph.values() for e in edges]


def _package(module: str) -> str:
    """`turnkeeper.cli.app` → `cli`; `turnkeeper.__main__` (the command line's entry) → `cli`."""
    name = module.split(".")[1] if "." in module else ""
    return "cli" if name == "__main__" else name


def test_no_interface_imports_another_at_module_level() -> None:
    crossing = [
        (source, target)
        for source, target, kind in _edges()
        if kind != "lazy" and _package(source) in INTERFACES
        if _package(target) in INTERFACES and _package(target) != _package(source)
    ]
    assert crossing == []


def test_an_interface_is_imported_by_another_only_inside_the_function_that_starts_it() -> None:
    """`turnkeeper serve` starts the HTTP service, `turnkeeper mcp` the MCP server on stdio, and
    the service's `/mcp` endpoint the MCP server over HTTP: three modules, each importing the
    other interface in the function that starts it."""
    lazy = {
        (source, _package(target))
        for source, target, kind in _edges()
        if kind == "lazy" and _package(source) in INTERFACES
        if _package(target) in INTERFACES and _package(target) != _package(source)
    }
    assert lazy == {
        ("turnkeeper.cli.server", "server"),
        ("turnkeeper.cli.mcp", "mcp"),
        ("turnkeeper.server.mcp", "mcp"),
    }


def test_storage_context_and_service_import_no_interface() -> None:
    upward = [
        (source, target)
        for source, target, _ in _edges()
        if _package(source) in ("storage", "context", "service")
        if _package(target) in (*INTERFACES, "adapters")
    ]
    assert upward == []


def test_the_checker_names_an_interface_importing_another(tmp_path: Path) -> None:
    package = tmp_path / "turnkeeper"
    for name in ("cli", "mcp", "server"):
        (package / name).mkdir(parents=True)
        (package / name / "__init__.py").write_text("")
    sources = {
        "__init__.py": "",
        "records.py": "",
        "mcp/tools.py": "from turnkeeper.cli import output\n",  # the shape it must not have
        "cli/output.py": "from turnkeeper import records\n",
        "cli/mcp.py": "def mcp():\n    from turnkeeper.mcp import tools\n",  # starts it: allowed
        "cli/chat.py": "def chat():\n    from turnkeeper.server import app\n",  # not allowed
        "server/app.py": "",
    }
    for name, body in sources.items():
        (package / name).write_text(body)
    _, problems = _script().check(package)
    crossings = [problem for problem in problems if "interfaces stay apart" in problem]
    assert crossings == [
        "turnkeeper.cli.chat (cli) imports turnkeeper.server.app (server):"
        " interfaces stay apart [lazy]",
        "turnkeeper.mcp.tools (mcp) imports turnkeeper.cli.output (cli):"
        " interfaces stay apart [top]",
    ]
