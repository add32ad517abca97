"""The shape of the middle: no function in the service or the context layer is longer than
`LONGEST` lines (signature, docstring and body), so each can be read on one screen."""

from __future__ import annotations

import ast
from pathlib import Path

import turnkeeper

LONGEST = 60
PACKAGES = ("service", "context")


def _functions(path: Path) -> list[tuple[str, int]]:
    """Each function of a module (methods and nested ones included), with its line count."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            assert node.end_lineno is not None
            found.append((f"{path.name}:{node.lineno} {node.name}", node.end_lineno - start + 1))
    return found


def _modules() -> list[Path]:
    root = Path(turnkeeper.__file__).parent
    return sorted(path for package in PACKAGES for path in (root / package).rglob("*.py"))


def test_no_function_in_the_service_or_the_context_layer_is_longer_than_60_lines() -> None:
    modules = _modules()
    assert len(modules) >= 15  # both packages were found and read
    too_long = [
        f"{name}: {lines} lines"
        for path in modules
        for name, lines in _functions(path)
        if lines > LONGEST
    ]
    assert too_long == []


def test_the_rule_catches_a_long_function(tmp_path: Path) -> None:
    module = tmp_path / "long.py"
    body = "".join(f"    x{n} = {n}\n" for n in range(LONGEST))
    module.write_text(f"def long() -> None:\n{body}\n\ndef short() -> None:\n    pass\n")
    assert dict((name.split()[-1], lines) for name, lines in _functions(module)) == {
        "long": LONGEST + 1,
        "short": 2,
    }
