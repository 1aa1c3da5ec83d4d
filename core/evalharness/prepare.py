"""What a run needs before its first case: the system under test imported (its options
checked), the judge built from its backend, the database built or opened and the corpus read
(``prepare_context``); ``check_resources``, what ``validate`` checks of them. Below the run
loop (runner.py) and the executors' workers, which both prepare the same way.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalharness.context import Database, EvalContext, build_sqlite, load_corpus
from evalharness.errors import USER_CODE_ERRORS, ScenarioError, describe
from evalharness.importing import import_file, import_module, is_path
from evalharness.scenario import Scenario

PARAMETER = "overrides"
"""The keyword parameter a system callable declares to accept oracle overrides
(docs/bottleneck.md, "Oracle headroom")."""

REPEAT = "repeat"
"""The keyword parameter a system callable may declare to be told which repeat of a case it
answers (1, 2, …) in a run with ``--repeat N`` (docs/repeat.md): a system with randomness of
its own can seed it per repeat."""


def takes_keyword(func: Callable[..., Any] | None, name: str) -> bool:
    """Whether ``func`` declares the keyword parameter ``name`` (a bare ``**kwargs`` does not
    count).

    >>> def answer(case, *, repeat=None): ...
    >>> takes_keyword(answer, "repeat"), takes_keyword(lambda case, **kw: None, "repeat")
    (True, False)
    """
    if func is None:
        return False
    try:
        parameters = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    found = parameters.get(name)
    return found is not None and found.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                inspect.Parameter.KEYWORD_ONLY)


def load_system(scenario: Scenario) -> Callable[..., Any]:
    """Import the system under test named in the scenario; errors name the scenario field."""
    spec = scenario.system
    assert spec is not None
    target, _, func_name = spec.callable.rpartition(":")
    where = f"{scenario.path}, field `system`"
    if is_path(target):
        try:
            module = import_file(scenario.base / target, "evalharness_system")
        except USER_CODE_ERRORS as exc:
            raise ScenarioError(f"{where}: importing {target!r} failed: "
                                f"{describe(exc)}") from None
    else:
        try:
            module = import_module(target, scenario.base)
        except USER_CODE_ERRORS as exc:
            raise ScenarioError(f"{where}: cannot import module {target!r}: "
                                f"{describe(exc)}. Use `package.module:function` "
                                "for an importable module, `path/file.py:function` or "
                                "`path/to/package:function`") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        names = [n for n, v in vars(module).items() if callable(v) and not n.startswith("_")]
        raise ScenarioError(f"{where}: {target!r} has no function {func_name!r}; callables "
                            f"there: {', '.join(sorted(names)[:12]) or 'none'}")
    _check_options(scenario, func)
    return func


def _check_options(scenario: Scenario, func: Callable[..., Any]) -> None:
    """Every ``system.options`` key must be a keyword parameter of the system callable (one
    it does not take would make every case a ``TypeError``)."""
    try:
        parameters = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return  # a builtin or C callable: nothing to check against
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    takes = [name for name, p in parameters.items()
             if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)]
    for key in scenario.system.options:
        if key in (PARAMETER, REPEAT):
            raise ScenarioError(
                f"{scenario.where(('system', 'options', key))}: {key!r} is not an option: "
                "evalharness passes it itself (overrides: the oracle reruns; repeat: which "
                "repeat of a case, with --repeat)")
        if key not in takes or key == next(iter(parameters), None):
            others = [n for n in takes[1:] if n not in (PARAMETER, REPEAT)]
            raise ScenarioError(
                f"{scenario.where(('system', 'options', key))}: the system "
                f"{scenario.system.callable} has no parameter {key!r}, so every case would fail "
                f"with a TypeError; its keyword parameters: {', '.join(others) or 'none'}")


def make_judge(scenario: Scenario):
    """The scenario's judge, from its registered backend (errors name the file, the line and
    the judge block)."""
    backend = scenario.host.judge_backend(scenario.spec.judge.backend)
    try:
        judge = backend.factory(scenario.spec.judge)
        try:
            judge.check_limits()
        except ValueError as exc:
            judge.close()
            raise ScenarioError(str(exc)) from None
        return judge
    except ScenarioError as exc:
        if str(exc).startswith(str(scenario.path)):
            raise
        raise ScenarioError(f"{scenario.where(('judge',))}: {exc}") from None


def prepare_context(scenario: Scenario, out_dir: Path, judge=None) -> EvalContext:
    """Build the database, load the corpus and (unless given) make the judge."""
    judge = judge if judge is not None else make_judge(scenario)
    database = None
    spec = scenario.spec.database
    if spec is not None:
        path = scenario.database_path
        if scenario.database_build is not None and (path is None or not path.is_file()):
            path = path or out_dir / "database.sqlite"
            build_sqlite(scenario.database_build, path)
        database = Database(path=path, engine=spec.engine, dialect=spec.dialect, dsn=spec.dsn)
    corpus = load_corpus(scenario.corpus_path) if scenario.corpus_path else {}
    return EvalContext(judge=judge, database=database, corpus=corpus,
                       pipeline=scenario.pipeline)


def check_resources(scenario: Scenario) -> None:
    """What ``validate`` checks beyond the scenario file: the database build script runs (on
    a scratch copy), the database opens, and every corpus line is a chunk."""
    import sqlite3
    import tempfile

    if scenario.database_build is not None:
        with tempfile.TemporaryDirectory(prefix="evalharness-validate-") as tmp:
            build_sqlite(scenario.database_build, Path(tmp) / "check.sqlite")
    elif scenario.database_path is not None and scenario.spec.database.engine == "sqlite":
        try:
            with contextlib.closing(Database(path=scenario.database_path).connect()) as conn:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            raise ScenarioError(f"{scenario.where(('database', 'path'))}: "
                                f"{scenario.database_path} is not a readable SQLite database "
                                f"({exc})") from None
    if scenario.corpus_path is not None:
        load_corpus(scenario.corpus_path)
