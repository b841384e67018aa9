"""The code's import graph: no circles, and the engine reaches the repository tools only
where a checkout offers them (issue 29: "a house a newcomer can extend").

Every import statement counts, the ones inside functions too: a deferred import is still
a dependency a reader has to follow."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"faildex": ROOT / "pyodide_app" / "faildex", "generator": ROOT / "generator"}
# the engine's two doors into a checkout: its repository commands (validate, new, schema,
# index) and the index compiled from entries/ (an installed wheel has neither)
ENGINE_TO_TOOLS = {("faildex.command", "generator.cli"), ("faildex.indexfile", "generator.index")}


def modules() -> dict[str, Path]:
    out = {}
    for pkg, folder in PACKAGES.items():
        for f in folder.glob("*.py"):
            out[pkg if f.stem == "__init__" else f"{pkg}.{f.stem}"] = f
    return out


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        pkg = name.split(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = (pkg if node.module is None else f"{pkg}.{node.module}") if node.level else node.module
                # `from . import scan` imports the module scan; `from .scan import x`, scan
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]
                targets = subs or [base]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in mods and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_itself_through_others():
    assert cycles(import_graph()) == []


def test_the_finder_sees_a_circle():
    # the check above can fail: a deferred import that closes a loop is found
    graph = import_graph()
    graph["generator.loader"].add("generator.validate")
    assert any({"generator.loader", "generator.validate"} <= set(c) for c in cycles(graph))


def test_the_engine_reaches_the_repository_tools_only_through_its_two_doors():
    graph = import_graph()
    crossing = {(a, b) for a, targets in graph.items() for b in targets
                if a.startswith("faildex") and b.startswith("generator")}
    assert crossing == ENGINE_TO_TOOLS
