"""The equivalence cascade: an ordered tuple of stages, each deciding or passing the pair on.

``parse -> normalise -> execute -> test_suite -> judge``: the cheap, certain stages first,
the LLM last. Each stage is a function of one :class:`~evalharness_sql.verdict.Pair` that
returns a :class:`~evalharness_sql.verdict.Verdict` or ``None`` (undecided, go on); a stage
marked ``batched`` (the judge) takes every undecided pair of the batch at once. Each pair's
own stages run on its clock (:class:`~evalharness_sql.verdict.Clock`), against its evaluation
budget (``Options.budget_s``); the batched judge's time is shared and not counted.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from evalharness_sql.engines import Engine, open_engine
from evalharness_sql.stages import execute, judge, normalise, parse, test_suite
from evalharness_sql.taxonomy import categorize
from evalharness_sql.verdict import Options, Pair, Verdict

STAGES: tuple[Callable[..., Any], ...] = (parse, normalise, execute, test_suite, judge)
"""The stages, in the order they run."""


def run_cascade(pairs: Sequence[Pair], stages: Sequence[Callable[..., Any]] = STAGES) -> None:
    """Run the stages over the pairs, in order; every pair ends with a verdict."""
    names = None
    if pairs and pairs[0].options.stages is not None:
        names = set(pairs[0].options.stages) | {"parse"}
    for stage in stages:
        if names is not None and stage.__name__ not in names:
            continue
        pending = [p for p in pairs if p.verdict is None]
        if not pending:
            break
        if getattr(stage, "batched", False):
            stage(pending)
            continue
        for pair in pending:
            try:
                with pair.clock:
                    pair.verdict = stage(pair)
            except Exception as exc:  # noqa: BLE001 - a stage bug must not lose the batch
                pair.notes.setdefault("stage_errors", []).append(
                    f"{stage.__name__}: {type(exc).__name__}: {exc}")
    for pair in pairs:
        if pair.verdict is None:
            pair.verdict = Verdict(None, "undecided", _undecided_reason(pair))
        _finish(pair)


def _finish(pair: Pair) -> None:
    verdict = pair.verdict
    assert verdict is not None
    if verdict.equivalent is False and verdict.category is None:
        verdict.category = categorize(pair)
    if pair.valid_sql is None and verdict.equivalent is not None:
        pair.valid_sql = verdict.category not in ("invalid_sql", "refused", "unknown_table",
                                                  "unknown_column")


def _undecided_reason(pair: Pair) -> str:
    why = []
    if pair.engine is None:
        why.append("there is no database to execute on")
    elif pair.connection is None:
        why.append(f"{pair.engine.describe()} could not be opened"
                   + (f" ({pair.notes['connect']})" if "connect" in pair.notes else ""))
    if "gold_execution" in pair.notes:
        why.append(f"the gold query does not run ({pair.notes['gold_execution']})")
    if "gold_parse" in pair.notes:
        why.append(pair.notes["gold_parse"])
    if "test_suite" in pair.notes:
        why.append(pair.notes["test_suite"])
    elif pair.engine is not None and not pair.engine.supports_test_suite:
        why.append(f"the test-suite stage is not available for {pair.engine.name}")
    if pair.options.judge is None:
        why.append("no judge is configured")
    elif "judge" in pair.notes:
        why.append(pair.notes["judge"])
    if "budget" in pair.notes:
        why.append(pair.notes["budget"].removeprefix("undecided: "))
    for error in pair.notes.get("stage_errors", []):
        why.append(f"stage {error}")
    if (pair.normal_forms is not None or pair.gold_normal is not None) and not why:
        why.append("the normal forms differ")
    return "undecided: " + ("; ".join(why) if why else "no stage could decide")


def check_many(pairs: Sequence[tuple[str, str]], database: Any = None, dialect: str = "sqlite",
               *, predicted_dialect: str | None = None, judge: Any = None,
               schema: str | None = None, options: Options | None = None,
               budget_s: float | None = None) -> list[Verdict]:
    """:func:`check_equivalence` for many ``(gold, predicted)`` pairs on one database: one
    connection, and one judge call for all the pairs execution leaves undecided.
    ``budget_s`` is each pair's own budget."""
    opts = dataclasses.replace(options) if options is not None else Options()
    if judge is not None:
        opts.judge = judge
    if budget_s is not None:
        opts.budget_s = budget_s
    engine = open_engine(database, schema=schema)
    batch = [Pair(g, p, dialect=dialect, predicted_dialect=predicted_dialect, engine=engine,
                  options=opts) for g, p in pairs]
    with _connection(engine, batch, opts) as conn:
        for pair in batch:
            pair.connection = conn
        run_cascade(batch)
        for pair in batch:
            pair.connection = None
    return [p.verdict for p in batch if p.verdict is not None]


@contextlib.contextmanager
def _connection(engine: Engine | None, batch: list[Pair], options: Options):
    if engine is None:
        yield None
        return
    try:
        conn = engine.connect(limits=options.limits())
    except Exception as exc:  # noqa: BLE001 - an unreachable database leaves pairs undecided
        for pair in batch:
            pair.notes["connect"] = f"{type(exc).__name__}: {exc}"
        yield None
        return
    try:
        yield conn
    finally:
        conn.close()


def check_equivalence(gold: str, pred: str, database: Any = None, dialect: str = "sqlite", *,
                      predicted_dialect: str | None = None, judge: Any = None,
                      schema: str | None = None, options: Options | None = None,
                      budget_s: float | None = None) -> Verdict:
    """Whether ``pred`` is equivalent to ``gold``: the same rows (as a multiset, or in the same
    order when ``gold`` orders its rows) on every database with the schema.

    ``database`` is a path to a SQLite file, ``duckdb:PATH`` / a ``.duckdb`` file, or a
    ``postgresql://`` DSN (or the scenario's ``context.database``); without one, ``schema``
    (``CREATE TABLE`` statements) gives the test-suite stage an empty database to fill.
    ``predicted_dialect`` transpiles a prediction written in another dialect. ``judge``
    decides what the deterministic stages cannot (an object with ``run_many``, such as
    ``context.judge``). ``options`` holds the time limit, the caps (rows, value and result
    bytes, DuckDB memory) and K; ``budget_s`` caps the seconds spent on the pair (past it the
    pair is undecided, with a reason naming the budget).

    The :class:`Verdict` has ``equivalent`` (True, False, or None when undecided), the
    ``stage`` that decided, the ``reason`` and, when not equivalent, a ``counterexample``.

    >>> v = check_equivalence("SELECT name FROM t WHERE age > 30",
    ...                       "SELECT name FROM t WHERE age >= 31",
    ...                       schema="CREATE TABLE t (name TEXT, age REAL)")
    >>> v.equivalent, v.stage, v.counterexample["database"]["recipe"].split(":")[0]
    (False, 'test_suite', 'generated')
    >>> check_equivalence("SELECT 1", "SELECT 1 -- same").stage
    'normalise'
    """
    return check_many([(gold, pred)], database, dialect, predicted_dialect=predicted_dialect,
                      judge=judge, schema=schema, options=options, budget_s=budget_s)[0]
