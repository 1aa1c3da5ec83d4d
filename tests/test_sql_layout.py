"""The SQL plugin's files each have one job: the package's ``__init__`` declares and registers
(the evaluators' work is in ``evaluators.py``, their settings in ``settings.py``), the
test-database generation is split by job behind ``generate.py``, and the database engines are
one a module behind ``engines.py``."""

from __future__ import annotations

import ast
import importlib

import pytest

from conftest import ROOT

PLUGIN = ROOT / "plugins" / "evalharness_sql"

THIN = {
    # the functions each Evaluator(...) is registered with: their names stay
    # ``evalharness_sql.exact_match`` / ``.equivalence``; the work is in evaluators.py
    "exact_match", "equivalence",
    # the public API to run an evaluator by name (needs this module's register_evaluators)
    "evaluate_text2sql",
    # the text-to-SQL oracle registered by register_oracles (evaluators.oracle_output)
    "perfect_text2sql",
}
"""Top-level functions of ``__init__`` besides hook implementations: thin wrappers, each one
``return`` of a call (after its docstring)."""

GENERATE_PARTS = ["gen_hints", "gen_pools", "gen_rows", "gen_groups", "gen_perturb"]
"""The modules ``generate.py`` was split into, one job each."""


def _tree(name: str) -> ast.Module:
    return ast.parse((PLUGIN / f"{name}.py").read_text(encoding="utf-8"))


def _is_hookimpl(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any((d.id if isinstance(d, ast.Name) else getattr(d, "attr", None)) == "hookimpl"
               for d in node.decorator_list)


def _body(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    """The statements after the docstring."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return body


def test_init_defines_hook_implementations_and_thin_wrappers_only():
    tree = _tree("__init__")
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    other = [n.name for n in functions if not _is_hookimpl(n) and n.name not in THIN]
    assert other == [], f"evaluator logic belongs in evaluators.py: {other}"
    for node in functions:
        if node.name in THIN:
            body = _body(node)
            assert len(body) == 1 and isinstance(body[0], ast.Return) \
                and isinstance(body[0].value, ast.Call), f"{node.name} is not a thin wrapper"
    assert {n.name for n in functions if _is_hookimpl(n)} == {
        "register_evaluators", "register_oracles", "report_sections"}
    assert [n.name for n in tree.body if isinstance(n, ast.ClassDef)] == [], \
        "the settings models are in settings.py"


@pytest.mark.parametrize("module", ["evaluators", "settings"])
def test_evaluators_and_settings_do_not_import_the_package_init(module):
    """``from evalharness_sql import x`` is allowed only for a submodule ``x``."""
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.Import):
            assert all(a.name != "evalharness_sql" for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module == "evalharness_sql":
            for alias in node.names:
                assert (PLUGIN / f"{alias.name}.py").is_file() or \
                    (PLUGIN / alias.name / "__init__.py").is_file(), alias.name


@pytest.mark.parametrize("module", GENERATE_PARTS)
def test_each_part_of_generate_says_its_job_and_does_not_import_generate(module):
    tree = _tree(module)
    assert (ast.get_docstring(tree) or "").strip(), f"{module}.py has no docstring"
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.module != "evalharness_sql.generate", module
            if node.module == "evalharness_sql":
                assert all(a.name != "generate" for a in node.names), module
        elif isinstance(node, ast.Import):
            assert all(a.name != "evalharness_sql.generate" for a in node.names), module


def test_generate_is_the_face_of_its_parts():
    generate = importlib.import_module("evalharness_sql.generate")
    for name in generate.__all__:
        assert hasattr(generate, name), name
    for name in ("Hints", "Recipe", "hints", "recipes"):  # what the test-suite stage imports
        assert name in generate.__all__


def test_public_names_stay_importable_from_the_package():
    sql = importlib.import_module("evalharness_sql")
    for name in [*sql.__all__, "EQUIVALENCE_METRICS", "METRICS", "ORACLE_MAX_ROWS", "SQL",
                 "EquivalenceSettings", "ExactMatchSettings", "evaluate_text2sql",
                 "exact_match", "equivalence", "pair_key", "perfect_text2sql",
                 "register_evaluators", "register_oracles", "report_sections", "__version__"]:
        assert hasattr(sql, name), name


ENGINE_MODULES = {"engine_sqlite": "SQLiteEngine", "engine_duckdb": "DuckDBEngine",
                  "engine_postgres": "PostgresEngine"}
"""One engine a module (``engines.py`` was split); ``engine_base.py`` holds what they share."""


def _imported_modules(tree: ast.Module) -> set[str]:
    """Every module ``tree`` imports, at the top or inside a function; ``from evalharness_sql
    import x`` counts as an import of ``evalharness_sql.x``."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


@pytest.mark.parametrize("module", sorted(ENGINE_MODULES))
def test_each_engine_module_holds_one_engine_and_does_not_import_engines(module):
    tree = _tree(module)
    assert (ast.get_docstring(tree) or "").strip(), f"{module}.py has no docstring"
    engines = [n.name for n in tree.body
               if isinstance(n, ast.ClassDef) and n.name.endswith("Engine")]
    assert engines == [ENGINE_MODULES[module]], engines
    imported = _imported_modules(tree)
    assert "evalharness_sql.engines" not in imported, module
    assert not imported & {f"evalharness_sql.{m}" for m in ENGINE_MODULES if m != module}, \
        "what two engines share belongs in engine_base.py"


def test_the_engine_base_holds_only_the_base_class_and_imports_no_engine():
    tree = _tree("engine_base")
    assert (ast.get_docstring(tree) or "").strip()
    assert [n.name for n in tree.body if isinstance(n, ast.ClassDef)] == ["Engine"]
    assert not _imported_modules(tree) & {
        "evalharness_sql.engines", *(f"evalharness_sql.{m}" for m in ENGINE_MODULES)}


def test_engines_is_the_face_of_the_engine_modules():
    engines = importlib.import_module("evalharness_sql.engines")
    for name in engines.__all__:
        assert hasattr(engines, name), name
    for module, cls in ENGINE_MODULES.items():
        assert getattr(engines, cls) is getattr(
            importlib.import_module(f"evalharness_sql.{module}"), cls)
    assert engines.Engine is importlib.import_module("evalharness_sql.engine_base").Engine
    assert [n.name for n in _tree("engines").body if isinstance(n, ast.ClassDef)] == [], \
        "the engines are in their own modules"
