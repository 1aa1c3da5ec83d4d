"""Stage 4, test suite: run both queries on K perturbed or generated databases; any difference decides."""

from __future__ import annotations

import contextlib
from typing import Any

from evalharness_sql.compare import Comparison, compare, expected, jsonable
from evalharness_sql.contract import violations
from evalharness_sql.generate import Recipe, hints, recipes
from evalharness_sql.shrink import rows_in, shrink
from evalharness_sql.stages.execute import (
    budget_verdict,
    run_gold,
    run_query,
    too_large_verdict,
    visible,
)
from evalharness_sql.taxonomy import categorize, error_category
from evalharness_sql.verdict import Pair, Verdict


def test_suite(pair: Pair) -> Verdict | None:
    """Build K small databases with the scenario's schema (:mod:`evalharness_sql.generate`:
    perturbed samples of the real data, and databases generated from the schema and the
    queries' literals) and compare the results on each. The first difference decides *not
    equivalent*, with the database's recipe and rows as the counterexample; equal results
    on every database (and on the scenario's, when it has one) decide *equivalent by test
    suite*. This is evidence, not proof: a difference that none of the K databases provokes
    goes unseen. When no database gives the gold query a row, nothing is decided.

    >>> from evalharness_sql.engines import SQLiteEngine
    >>> from evalharness_sql.stages.parse import parse
    >>> from evalharness_sql.stages.normalise import normalise
    >>> engine = SQLiteEngine.from_ddl("CREATE TABLE t (id INTEGER PRIMARY KEY, age INT)")
    >>> pair = Pair("SELECT id FROM t WHERE age > 30", "SELECT id FROM t WHERE age >= 30",
    ...             engine=engine)
    >>> _ = parse(pair), normalise(pair)
    >>> verdict = test_suite(pair)
    >>> verdict.equivalent, verdict.counterexample["database"]["recipe"].split(":")[0]
    (False, 'generated')
    >>> pair = Pair("SELECT id FROM t WHERE age > 30", "SELECT id FROM t WHERE NOT age <= 30",
    ...             engine=engine)
    >>> _ = parse(pair), normalise(pair)
    >>> test_suite(pair).reason
    'equivalent by test suite (32 databases): the same results on every one'
    """
    engine = pair.engine
    opts = pair.options
    if engine is None or not engine.supports_test_suite or opts.test_suite_size <= 0:
        return None
    if pair.predicted_sql is None or pair.gold_error is not None:
        return None
    schema = engine.schema()
    trees = [pair.gold_normal or pair.gold_tree, pair.predicted_normal or pair.predicted_tree]
    aims = hints(trees, schema)
    key = pair.gold + "\x00" + (pair.predicted_sql or "")
    allowed = pair.permutations
    tried = 0
    rows_seen = bool(pair.gold_result and pair.gold_result.ok and pair.gold_result.rows)
    limits = opts.limits()
    rejected = 0
    for recipe in recipes(engine, aims, opts.test_suite_size, opts.seed, key):
        if pair.clock.remaining() <= 0:
            return _out_of_budget(pair, tried)
        problems = violations(schema, recipe.data)
        if problems:  # not a database of the schema: it would prove nothing
            rejected += 1
            pair.notes.setdefault("test_suite_rejected", []).append(
                f"{recipe.number}: {problems[0]}")
            continue
        try:
            conn = engine.build(recipe.data, limits=limits)
        except Exception as exc:  # noqa: BLE001 - a recipe the engine rejects is skipped
            pair.notes.setdefault("test_suite_skipped", []).append(f"{recipe.number}: {exc}")
            continue
        with contextlib.closing(conn):
            gold, ordering = run_gold(pair, conn)
            if gold.status == "budget":
                return _out_of_budget(pair, tried)
            if not gold.ok:
                pair.notes.setdefault("test_suite_skipped", []).append(
                    f"{recipe.number}: gold {gold.summary()}")
                continue
            # by text: the sandbox checks a text once (a tree would be walked on every run)
            predicted = run_query(pair, conn, pair.predicted_sql)
        if predicted.status == "budget":
            return _out_of_budget(pair, tried)
        tried += 1
        rows_seen = rows_seen or bool(gold.rows)
        if predicted.status in ("too_many_rows", "too_large"):
            verdict = too_large_verdict(pair, "test_suite", predicted, recipe.describe(),
                                        "the gold query runs")
            assert verdict.counterexample is not None
            verdict.counterexample["database"] = recipe.to_dict(schema)
            return verdict
        if not predicted.ok:
            category = "timeout" if predicted.status == "timeout" else (
                "refused" if predicted.status == "refused" else
                error_category(predicted.error or ""))
            return Verdict(False, "test_suite",
                           f"the predicted query fails on {recipe.describe()} where the gold "
                           f"query runs: {predicted.summary()}",
                           {"kind": "error", "database": recipe.to_dict(schema),
                            "error": predicted.summary()},
                           category)
        comparison = compare(expected(gold.rows, ordering), predicted.rows,
                             len(visible(gold, ordering)), len(predicted.columns),
                             tolerance=opts.float_tolerance, allowed=allowed)
        if not comparison.equal:
            counterexample = {"kind": "rows", "database": recipe.to_dict(schema),
                              **comparison.counterexample(),
                              "gold_columns": visible(gold, ordering),
                              "predicted_columns": predicted.columns}
            counterexample.update(_minimal(pair, recipe, allowed, limits))
            return Verdict(False, "test_suite",
                           f"different results on {recipe.describe()}: {comparison.reason}",
                           counterexample,
                           "wrong_columns" if len(visible(gold, ordering)) !=
                           len(predicted.columns) else categorize(pair),
                           details={"databases": tried, "databases_rejected": rejected})
        if comparison.permutations is not None:
            allowed = comparison.permutations
    if tried == 0:
        pair.notes["test_suite"] = "no test database could run the gold query"
        return None
    if not rows_seen:
        pair.notes["test_suite"] = (f"the gold query returned no rows on any of the {tried} "
                                    "test databases: too little evidence")
        return None
    on_real = f" and on {engine.describe()}" if pair.execution_match else ""
    return Verdict(True, "test_suite",
                   f"equivalent by test suite ({tried} databases): the same results on every "
                   f"one{on_real}", details={"databases": tried, "databases_rejected": rejected})


def _outcome(pair: Pair, conn: Any, allowed: Any) -> Comparison | None:
    """How the two queries compare on one test database (None when either does not run)."""
    gold, ordering = run_gold(pair, conn)
    if not gold.ok:
        return None
    predicted = run_query(pair, conn, pair.predicted_sql or "")
    if not predicted.ok:
        return None
    return compare(expected(gold.rows, ordering), predicted.rows,
                   len(visible(gold, ordering)), len(predicted.columns),
                   tolerance=pair.options.float_tolerance, allowed=allowed)


def _minimal(pair: Pair, recipe: Recipe, allowed: Any, limits: Any) -> dict[str, Any]:
    """The separating database shrunk to its fewest rows (:mod:`evalharness_sql.shrink`),
    with both queries' results on it: what a person reads to see the difference."""
    engine = pair.engine
    assert engine is not None
    schema = engine.schema()
    order = [t for t in schema.order() if t in recipe.data]

    def separates(data: dict[str, list[tuple[Any, ...]]]) -> bool:
        if pair.clock.remaining() <= 0:
            return False
        try:
            conn = engine.build(data, limits=limits)
        except Exception:  # noqa: BLE001 - a candidate the engine rejects does not separate
            return False
        with contextlib.closing(conn):
            outcome = _outcome(pair, conn, allowed)
        return outcome is not None and not outcome.equal

    small, runs = shrink(schema, order, recipe.data, separates)
    out: dict[str, Any] = {"minimal": {
        "tables": Recipe(recipe.number, recipe.kind, recipe.seed, recipe.steps, small)
        .to_dict(schema, max_rows=MAX_SHOWN)["tables"],
        "rows": rows_in(small), "rows_before": rows_in(recipe.data), "runs": runs,
        "queries": {"gold": pair.gold, "predicted": pair.predicted_sql or pair.predicted}}}
    try:
        conn = engine.build(small, limits=limits)
    except Exception:  # noqa: BLE001 - the rows are shown without the results
        return out
    with contextlib.closing(conn):
        gold = run_query(pair, conn, pair.gold)
        predicted = run_query(pair, conn, pair.predicted_sql or "")
    for name, result in (("gold", gold), ("predicted", predicted)):
        if result.ok:
            out["minimal"][name] = {"columns": list(result.columns),
                                    "rows": [jsonable(r) for r in result.rows[:MAX_SHOWN]],
                                    **({"rows_total": len(result.rows)}
                                       if len(result.rows) > MAX_SHOWN else {})}
    return out


MAX_SHOWN = 50
"""Rows of a table or a result shown in a minimal counterexample, at most."""


def _out_of_budget(pair: Pair, tried: int) -> Verdict:
    return budget_verdict(pair, "test_suite", f" after {tried} of "
                          f"{pair.options.test_suite_size} databases")
