"""Stage 4, test suite: run both queries on K perturbed or generated databases; any difference decides."""

from __future__ import annotations

import contextlib

from evalharness_sql.compare import compare, expected
from evalharness_sql.generate import hints, recipes
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
    statements = [pair.predicted_tree] if pair.predicted_tree is not None else None
    limits = opts.limits()
    for recipe in recipes(engine, aims, opts.test_suite_size, opts.seed, key):
        if pair.clock.remaining() <= 0:
            return _out_of_budget(pair, tried)
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
            predicted = run_query(pair, conn, pair.predicted_sql, statements=statements)
        if predicted.status == "budget":
            return _out_of_budget(pair, tried)
        tried += 1
        rows_seen = rows_seen or bool(gold.rows)
        database = recipe.to_dict(schema)
        if predicted.status in ("too_many_rows", "too_large"):
            verdict = too_large_verdict(pair, "test_suite", predicted, recipe.describe(),
                                        "the gold query runs")
            assert verdict.counterexample is not None
            verdict.counterexample["database"] = database
            return verdict
        if not predicted.ok:
            category = "timeout" if predicted.status == "timeout" else (
                "refused" if predicted.status == "refused" else
                error_category(predicted.error or ""))
            return Verdict(False, "test_suite",
                           f"the predicted query fails on {recipe.describe()} where the gold "
                           f"query runs: {predicted.summary()}",
                           {"kind": "error", "database": database, "error": predicted.summary()},
                           category)
        comparison = compare(expected(gold.rows, ordering), predicted.rows,
                             len(visible(gold, ordering)), len(predicted.columns),
                             tolerance=opts.float_tolerance, allowed=allowed)
        if not comparison.equal:
            return Verdict(False, "test_suite",
                           f"different results on {recipe.describe()}: {comparison.reason}",
                           {"kind": "rows", "database": database, **comparison.counterexample(),
                            "gold_columns": visible(gold, ordering),
                            "predicted_columns": predicted.columns},
                           "wrong_columns" if len(visible(gold, ordering)) !=
                           len(predicted.columns) else categorize(pair))
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
                   f"one{on_real}", details={"databases": tried})


def _out_of_budget(pair: Pair, tried: int) -> Verdict:
    return budget_verdict(pair, "test_suite", f" after {tried} of "
                          f"{pair.options.test_suite_size} databases")
