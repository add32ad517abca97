#!/usr/bin/env python3
"""Print turnkeeper's module import graph and check it against the declared layers.

    python scripts/import_graph.py            # the graph, then the verdict
    python scripts/import_graph.py --quiet    # the verdict only

Every `import` of a turnkeeper module is an edge, read from the source (nothing is imported):
at module level, inside a function (lazy, marked `~`) or under `if TYPE_CHECKING:` (marked `?`).
All three kinds must point to the importer's own layer or a lower one, and no kind may close a
cycle. A package's `__init__` re-exporting its own submodules is not an edge (the submodules
import their siblings, not the package); the top package's imports are edges like any other.

The three interfaces (the command line, MCP and HTTP) share a layer but not code: each depends
on the core, never on another. The only imports between them are the ones in `STARTS`, each
inside the function that starts the other interface. Exit status 1 on any violation;
`tests/test_layers.py` and `tests/test_import_graph.py` run this, so `make test` enforces it.
The layers are explained in `docs/architecture.md`.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "turnkeeper"
SOURCE = Path(__file__).resolve().parent.parent / "src" / PACKAGE

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation",
        (
            "errors",
            "_speedups",
            "jsonenc",
            "recent",
            "types",
            "records",
            "tokens",
            "validation",
            "logs",
            "metrics",
            "config",
            "wording",
            "openai_items",
        ),
    ),
    ("storage", ("storage",)),
    ("cache", ("cache",)),
    ("encryption", ("encryption",)),
    ("telemetry", ("telemetry",)),
    ("context", ("context",)),
    ("transfer", ("jsonl", "importers")),
    (
        "core",
        (
            "service",
            "expiry",
            "retention",
            "traces",
            "llm",
            "attempts",
            "turns",
            "anthropic_turns",
            "apikeys",
            "callers",
            "conversations",
            "responses",
        ),
    ),
    ("assembly", ("", "assemble", "prometheus")),
    ("interfaces", ("adapters", "server", "cli", "mcp", "__main__", "testing")),
)
"""Lowest first. A module belongs to the layer of its longest matching name (`""` is the
package itself); it may import from its own layer and the ones before it."""

INTERFACES: dict[str, tuple[str, ...]] = {
    "cli": ("cli", "__main__"),
    "mcp": ("mcp",),
    "server": ("server",),
}
"""Each interface and the modules it is made of. What two of them share (a record's JSON shape,
a phrase) lives below them: `records`, `wording`."""

STARTS: frozenset[tuple[str, str]] = frozenset(
    {
        ("turnkeeper.cli.server", "server"),  # `turnkeeper serve` runs the HTTP service
        ("turnkeeper.cli.mcp", "mcp"),  # `turnkeeper mcp` serves the MCP tools on stdio
        ("turnkeeper.server.mcp", "mcp"),  # the service's `/mcp` serves them over HTTP
    }
)
"""The imports allowed from one interface into another: (module, interface imported), and only
inside a function (lazy), so neither interface loads the other until it starts it."""

MARKS = {"top": " ", "lazy": "~", "typing": "?"}


@dataclass(frozen=True, order=True)
class Edge:
    source: str
    target: str
    kind: str  # top | lazy | typing


def module_names(root: Path) -> dict[str, Path]:
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = [PACKAGE, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def layer_of(module: str) -> int:
    """The index of `module`'s layer; a module no layer names is an error of its own."""
    relative = module.removeprefix(PACKAGE).removeprefix(".")
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = relative == prefix or (prefix and relative.startswith(prefix + "."))
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    if best is None:
        raise KeyError(module)
    return best[1]


def interface_of(module: str) -> str | None:
    """The interface `module` belongs to (`cli`, `mcp`, `server`), or None."""
    relative = module.removeprefix(PACKAGE).removeprefix(".")
    for interface, prefixes in INTERFACES.items():
        if any(relative == prefix or relative.startswith(prefix + ".") for prefix in prefixes):
            return interface
    return None


def crosses_interfaces(edge: Edge) -> bool:
    """True when `edge` goes from one interface into another other than as `STARTS` allows."""
    source, target = interface_of(edge.source), interface_of(edge.target)
    if source is None or target is None or source == target:
        return False
    return edge.kind != "lazy" or (edge.source, target) not in STARTS


def edges_of(module: str, path: Path, modules: dict[str, Path]) -> set[Edge]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[Edge] = set()

    def targets(node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*anchor, *([base] if base else [])])
        return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]

    def visit(node: ast.AST, kind: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                for target in targets(child):
                    if target in modules and target != module:
                        found.add(Edge(module, target, kind))
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for statement in child.body:
                    visit(ast.Module(body=[statement], type_ignores=[]), "typing")
                for statement in child.orelse:
                    visit(ast.Module(body=[statement], type_ignores=[]), kind)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(child, "typing" if kind == "typing" else "lazy")
            else:
                visit(child, kind)

    visit(tree, "top")
    if path.name == "__init__.py" and module != PACKAGE:  # a subpackage re-exporting its parts
        found = {e for e in found if not e.target.startswith(module + ".")}
    return found


def cycles(edges: set[Edge]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def check(root: Path = SOURCE) -> tuple[dict[str, list[Edge]], list[str]]:
    """The graph (module → its edges) and the violations found (empty: all is well)."""
    modules = module_names(root)
    graph = {name: sorted(edges_of(name, path, modules)) for name, path in modules.items()}
    problems: list[str] = []
    for name in modules:
        try:
            layer_of(name)
        except KeyError:
            problems.append(f"{name}: in no layer (add it to LAYERS in scripts/import_graph.py)")
    edges = {edge for found in graph.values() for edge in found}
    for edge in sorted(edges):
        try:
            source, target = layer_of(edge.source), layer_of(edge.target)
        except KeyError:
            continue
        if target > source:
            problems.append(
                f"{edge.source} ({LAYERS[source][0]}) imports {edge.target}"
                f" ({LAYERS[target][0]}) upward [{edge.kind}]"
            )
    for edge in sorted(edges):
        if crosses_interfaces(edge):
            problems.append(
                f"{edge.source} ({interface_of(edge.source)}) imports {edge.target}"
                f" ({interface_of(edge.target)}): interfaces stay apart [{edge.kind}]"
            )
    for component in cycles(edges):
        problems.append("import cycle: " + " ↔ ".join(component))
    return graph, problems


def main(argv: list[str]) -> int:
    graph, problems = check()
    if "--quiet" not in argv:
        print("layers, lowest first:")
        for number, (name, prefixes) in enumerate(LAYERS):
            shown = ", ".join(f"{PACKAGE}.{p}" if p else PACKAGE for p in prefixes)
            print(f"  {number} {name}: {shown}")
        print("\nimports (~ inside a function, ? under TYPE_CHECKING):")
        for name, edges in graph.items():
            try:
                layer = LAYERS[layer_of(name)][0]
            except KeyError:
                layer = "?"
            targets = ", ".join(f"{MARKS[e.kind]}{e.target}".strip() for e in edges) or "-"
            print(f"  [{layer}] {name} -> {targets}")
        print()
    for problem in problems:
        print(f"VIOLATION {problem}", file=sys.stderr)
    count = sum(len(edges) for edges in graph.values())
    verdict = "FAIL" if problems else "ok"
    print(f"{verdict}: {len(graph)} modules, {count} imports, {len(problems)} violations")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
