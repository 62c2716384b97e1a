"""Who may import whom, as data, checked on every module's AST — imports inside functions
included, `if TYPE_CHECKING:` blocks left out (they never run) — and no import cycle.

The engine's packages are layers in the order data flows; a module may import its own
layer and the ones before it. The doors — the command line (`tracekit.cli`,
`tracekit.__main__`), the Python door (`tracekit.__init__`, `tracekit.api`) and the
agent door (`tracekit.mcp_server` and its `mcp_*` modules, `tracekit mcp`) — wire
everything together and are the only engine modules that may import `diagnosers`, `tui`
or `instrument`, and then only inside functions (lazily).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("tracekit", "diagnosers", "tui", "instrument")

# the engine in data-flow order: (layer, module prefixes)
ENGINE_LAYERS: tuple[tuple[str, ...], ...] = (
    ("tracekit.version", "tracekit.errors", "tracekit.atomic"),
    ("tracekit.config",),
    ("tracekit.options",),
    ("tracekit.sql", "tracekit.model", "tracekit.manifest"),
    ("tracekit.ingest",),
    ("tracekit.store",),
    ("tracekit.metrics",),
    ("tracekit.stepmodel",),
    ("tracekit.report",),
    ("tracekit.analysis",),  # the facts the judges read (the schema's rows among them)
    ("tracekit.gate",),
)
DOORS = (
    "tracekit",
    "tracekit.__main__",
    "tracekit.cli",  # the group assembled; a module a command (or a close group)
    "tracekit.cli.__main__",
    "tracekit.cli.group",
    "tracekit.cli.params",
    "tracekit.cli.output",
    "tracekit.cli.oneshot",
    "tracekit.cli.analyze",
    "tracekit.cli.explain",
    "tracekit.cli.export",
    "tracekit.cli.gate",
    "tracekit.cli.ingest",
    "tracekit.cli.mcp",
    "tracekit.cli.query",
    "tracekit.cli.run",
    "tracekit.cli.tui",
    "tracekit.cli.whatif",
    "tracekit.api",
    "tracekit.commands",
    "tracekit.mcp_server",
    "tracekit.mcp_roots",
    "tracekit.mcp_calls",
    "tracekit.mcp_tools",
)
CONSUMERS = ("diagnosers", "tui", "instrument")
# what each consumer package may import besides itself
MAY_IMPORT = {
    "diagnosers": ("tracekit",),  # the engine, not its doors
    "tui": ("tracekit", "diagnosers"),
    "instrument": ("tracekit.errors", "tracekit.manifest", "tracekit.model", "tracekit.atomic"),
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(p): p
        for pkg in PACKAGES
        for p in (ROOT / pkg).rglob("*.py")
        if "__pycache__" not in p.parts
    }


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def imports(name: str) -> list[tuple[str, bool]]:
    """(imported module, at top level?) for every import of module `name` that runs."""
    tree = ast.parse(MODULES[name].read_text())
    out: list[tuple[str, bool]] = []

    def target(mod: str, attr: str | None) -> str:
        if attr and f"{mod}.{attr}" in MODULES:
            return f"{mod}.{attr}"
        return mod

    def visit(node: ast.AST, top: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child, top)
            return
        if isinstance(node, ast.Import):
            out.extend((a.name, top) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.extend((target(node.module, a.name), top) for a in node.names)
        inner = top and not isinstance(
            node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef
        )
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, True)
    return [(m, top) for m, top in out if m.split(".")[0] in PACKAGES]


def _layer(name: str) -> int | None:
    for i, prefixes in enumerate(ENGINE_LAYERS):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return i
    return None


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def violations() -> list[str]:
    bad = []
    for name in sorted(MODULES):
        pkg = name.split(".")[0]
        for imp, top in imports(name):
            ipkg = imp.split(".")[0]
            if name in DOORS:
                if ipkg in CONSUMERS and top:
                    bad.append(f"{name} imports {imp} at import time (doors import it lazily)")
                continue
            if pkg == "tracekit":
                if ipkg != "tracekit" or imp in DOORS:
                    bad.append(f"{name} imports {imp}: the engine imports none of its doors "
                               "or consumers")  # fmt: skip
                    continue
                mine, theirs = _layer(name), _layer(imp)
                if mine is None or theirs is None:
                    bad.append(f"{name} or {imp} is in no layer: add it to ENGINE_LAYERS")
                elif theirs > mine:
                    bad.append(f"{name} (layer {mine}) imports {imp} (layer {theirs})")
            else:
                allowed = (pkg, *MAY_IMPORT[pkg])
                if not _under(imp, allowed) or imp in DOORS:
                    bad.append(f"{name} imports {imp}; {pkg} may import {', '.join(allowed)}")
    return bad


def cycles() -> list[list[str]]:
    """Import cycles among the modules (every import that runs: a lazy one is still a
    dependency), by Tarjan's strongly connected components."""
    graph = {n: sorted({m for m, _ in imports(n) if m in MODULES and m != n}) for n in MODULES}
    # a package's __init__ that only re-exports its modules is not a dependency of them
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_every_module_is_in_a_layer():
    for name in MODULES:
        if name.startswith("tracekit") and name not in DOORS:
            assert _layer(name) is not None, f"{name}: add it to ENGINE_LAYERS"


def test_imports_follow_the_layers():
    assert violations() == []


def test_the_facts_name_no_judge():
    """`tracekit.analysis` computes figures; the judges (`diagnosers`) read them. Not even
    a type hint of the facts names a diagnoser: a threshold that defines a figure lives
    with the fact and the rule imports it from there."""
    for name, path in MODULES.items():
        if _under(name, ("tracekit.analysis",)):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                mods = []
                if isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    mods = [node.module]
                assert not any(m.split(".")[0] in CONSUMERS for m in mods), name


def test_no_import_cycles():
    assert cycles() == []


@pytest.mark.parametrize(
    "source,expect",
    [
        ("import tui\n", ["tracekit.report.render imports tui"]),
        ("def f():\n    import diagnosers\n", ["tracekit.report.render imports diagnosers"]),
        ("def f():\n    from tracekit.gate import compare\n", ["layer 8) imports tracekit.gate"]),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import tui\n", []),
    ],
)
def test_the_walk_sees_what_it_must(tmp_path, monkeypatch, source, expect):
    """The checker itself: a lazy import counts, a TYPE_CHECKING one does not."""
    fake = tmp_path / "render.py"
    fake.write_text(source)
    monkeypatch.setitem(MODULES, "tracekit.report.render", fake)
    found = [v for v in violations() if v.startswith("tracekit.report.render")]
    assert len(found) == len(expect)
    for want, got in zip(expect, found, strict=True):
        assert want in got
