"""The design held by a test: the import graph of the core and of each plugin package.

docs/architecture.md ("The contract") states the rules; this file checks them on the source.
Every import counts — at the top of a module or inside a function, ``import x`` or ``from x
import y`` — except under ``if TYPE_CHECKING:`` (type annotations only, never run). A
``from package import name`` counts as an import of the submodule ``package.name`` when there
is one, else of the package.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

from conftest import ROOT

CORE = ROOT / "core" / "evalharness"
PLUGINS = sorted(p for p in (ROOT / "plugins").iterdir() if (p / "__init__.py").is_file())
BUILT_IN = {p.name for p in PLUGINS}


def sources(package: Path) -> dict[str, str]:
    """Module name -> its source, for every module of ``package``."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path.read_text(encoding="utf-8")
    return out


def _type_checking_only(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skip


def imports(modules: Mapping[str, str]) -> dict[str, set[str]]:
    """Module -> every name it imports (resolved to a module of ``modules`` where one is
    meant, else kept as written: ``evalharness_sql``, ``numpy``)."""
    def inside(name: str) -> str:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    out: dict[str, set[str]] = {}
    for module, text in modules.items():
        tree = ast.parse(text)
        skip = _type_checking_only(tree)
        found: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Call) and _literal_import(node):
                name = node.args[0].value
                found.add(inside(name) or name)
            elif isinstance(node, ast.Import):
                found |= {inside(a.name) or a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = module if _is_package(module, modules) else \
                        module.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    found.add(full if full in modules else (inside(base) or base))
        out[module] = {name for name in found if name != module}
    return out


def _literal_import(call: ast.Call) -> bool:
    """``importlib.import_module("a.b")`` with the name written out: an import like any other
    (loading by a name held elsewhere, an entry point or the core's own plugin, is how plugins
    load, and is not counted)."""
    func = call.func
    named = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return (named in ("import_module", "__import__") and bool(call.args)
            and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str))


def _is_package(module: str, modules: Mapping[str, str]) -> bool:
    return any(other.startswith(module + ".") for other in modules)


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected sets of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def describe(graph: Mapping[str, set[str]], group: list[str]) -> str:
    members = set(group)
    return "; ".join(f"{m} -> {', '.join(sorted(graph[m] & members))}" for m in group)


@pytest.fixture(scope="module")
def core() -> dict[str, set[str]]:
    return imports(sources(CORE))


@pytest.mark.parametrize("package", [CORE, *PLUGINS], ids=lambda p: p.name)
def test_no_import_circle(package):
    graph = imports(sources(package))
    assert [describe(graph, c) for c in circles(graph)] == []


def test_the_check_finds_a_deliberately_added_back_edge():
    """The scenario is loaded before anything runs: one import of the runner inside one of
    its functions closes a circle, and the check names it."""
    modules = sources(CORE)
    modules["evalharness.scenario"] += "\n\ndef _sneaky():\n    from evalharness import runner\n"
    graph = imports(modules)
    found = circles(graph)
    assert len(found) == 1
    assert {"evalharness.scenario", "evalharness.runner"} <= set(found[0])
    assert "evalharness.scenario -> " in describe(graph, found[0])


def test_imports_under_type_checking_do_not_count():
    graph = imports({"a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import b\n",
                     "b": "import a\n"})
    assert circles(graph) == []
    assert circles(imports({"a": "def f():\n    import b\n", "b": "import a\n"})) == [["a", "b"]]
    dynamic = {"a": "import importlib\nimportlib.import_module('b')\n", "b": "import a\n"}
    assert circles(imports(dynamic)) == [["a", "b"]]


# -- the "never" rules of docs/architecture.md ----------------------------------------------

RUNNING = {"evalharness.runner", "evalharness.executors", "evalharness.ray_executor",
           "evalharness.local_executor", "evalharness.scoring", "evalharness.oracle",
           "evalharness.execution", "evalharness.api"}
REPORTING = {"evalharness.report", "evalharness.render", "evalharness.html",
             "evalharness.charts", "evalharness.markdown", "evalharness.junit", "evalharness.ci",
             "evalharness.compare"}


def _reach(graph: Mapping[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt in graph and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


@pytest.mark.parametrize(("module", "never", "why"), [
    ("evalharness.declarations", None, "a declaration is plain data: only errors below it"),
    ("evalharness.scenario", RUNNING | REPORTING, "a scenario is validated before anything runs"),
    ("evalharness.plugins", RUNNING | REPORTING, "the loader imports no plugin (it loads the "
                                                 "core's own by name, as an entry point)"),
    ("evalharness.verdicts", RUNNING | REPORTING, "verdicts read one case's result, nothing else"),
    ("evalharness.html", REPORTING - {"evalharness.html", "evalharness.charts",
                                      "evalharness.markdown"},
     "render.py calls the page, never back; the page's charts and Markdown are below it"),
    ("evalharness.executors", {"evalharness.ray_executor", "evalharness.local_executor",
                               "evalharness.runner", "evalharness.api"},
     "the protocol and the workers' side are below every executor"),
    ("evalharness.work", RUNNING | REPORTING | {"evalharness.scenario"},
     "what an executor is given is plain data"),
    ("evalharness.scoring", {"evalharness.verdicts", "evalharness.attribution"},
     "evaluation computes metrics only: verdicts are made from them afterwards, once"),
    ("evalharness.oracle", RUNNING - {"evalharness.oracle"},
     "the oracle plans the reruns and reads their records; the run's executor does them"),
    ("evalharness.render", RUNNING | {"evalharness.report"},
     "rendering reads a finished Report: it never aggregates nor runs"),
])
def test_never_rules(core, module, never, why):
    reached = _reach(core, module)
    if never is None:
        assert {m for m in core[module] if m.startswith("evalharness")} <= \
            {"evalharness.errors"}, why
    else:
        assert not reached & never, f"{why}: reaches {sorted(reached & never)}"


def test_the_core_imports_no_plugin_package(core):
    """Built-in plugins load through entry points, exactly as a third party's do."""
    named = {name.partition(".")[0] for names in core.values() for name in names}
    assert not named & BUILT_IN


def test_a_plugin_imports_no_other_plugin():
    for package in PLUGINS:
        named = {name.partition(".")[0] for names in imports(sources(package)).values()
                 for name in names}
        assert not named & (BUILT_IN - {package.name}), package.name
