"""Stage 3, execute: run both queries in the sandbox on the scenario's database and compare."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from sqlglot import exp
from sqlglot.errors import SqlglotError

from evalharness_sql.compare import Comparison, Ordering, compare, expected
from evalharness_sql.sandbox import Result, run
from evalharness_sql.taxonomy import categorize, error_category
from evalharness_sql.verdict import Pair, Verdict


@dataclass
class GoldPlan:
    """How to run the gold query so that its ordering can be checked: the SQL to run (with
    the ``ORDER BY`` values appended as extra columns and ``LIMIT``/``OFFSET`` removed) and
    where the keys are. ``keys`` index the result columns; a negative key ``-i`` is the i-th
    appended column."""

    sql: str
    ordered: bool = False
    keys: list[int] | None = None
    appended: int = 0
    offset: int = 0
    limit: int | None = None

    def ordering(self, n_columns: int) -> Ordering | None:
        if not self.ordered:
            return None
        visible = n_columns - self.appended
        keys = None if self.keys is None else [k if k >= 0 else visible - k - 1
                                               for k in self.keys]
        return Ordering(visible=visible, keys=keys, offset=self.offset, limit=self.limit)


def gold_plan(pair: Pair) -> GoldPlan:
    """The plan for the gold query (see :class:`GoldPlan`); cached on the pair.

    >>> from evalharness_sql.stages.parse import parse
    >>> pair = Pair("SELECT name FROM singer ORDER BY age DESC LIMIT 1", "SELECT 1")
    >>> _ = parse(pair)
    >>> plan = gold_plan(pair)
    >>> plan.sql, plan.keys, plan.limit
    ('SELECT name, age AS _order_1 FROM singer ORDER BY age DESC', [-1], 1)
    """
    if "gold_plan" in pair.notes:
        return pair.notes["gold_plan"]
    plan = _planned(pair.gold, pair.dialect, pair.gold_tree)
    pair.notes["gold_plan"] = plan
    return plan


def _planned(gold: str, dialect: str, tree: exp.Expression | None) -> GoldPlan:
    """:func:`_plan`, once per gold query (its tree is the parse of its text, or ``None``
    when that failed); each pair gets its own copy."""
    key = (gold, dialect, tree is None)
    with _PLANS_LOCK:
        plan = _PLANS.get(key)
    if plan is None:
        plan = _plan(tree, gold, dialect)
        with _PLANS_LOCK:
            _PLANS[key] = plan
            while len(_PLANS) > 4096:
                del _PLANS[next(iter(_PLANS))]
    return replace(plan, keys=None if plan.keys is None else list(plan.keys))


_PLANS: dict[tuple[str, str, bool], GoldPlan] = {}
_PLANS_LOCK = threading.Lock()


def _plan(tree: exp.Expression | None, sql: str, dialect: str) -> GoldPlan:
    if tree is None:
        ordered = "ORDER BY" in " ".join(sql.upper().split())
        return GoldPlan(sql, ordered=ordered)
    order = tree.args.get("order")
    if not order:
        return GoldPlan(sql)
    exact = GoldPlan(sql, ordered=True)
    limit, offset = _literal(tree.args.get("limit")), _literal(tree.args.get("offset"))
    if (tree.args.get("limit") and limit is None) or (tree.args.get("offset") and offset is None):
        return exact
    copy = tree.copy()
    copy.set("limit", None)
    copy.set("offset", None)
    keys: list[int] = []
    if isinstance(copy, exp.SetOperation):
        first = copy.find(exp.Select)
        names = [e.alias_or_name for e in first.expressions] if first else []
        for ordered in order.expressions:
            key = ordered.this
            if isinstance(key, exp.Literal) and key.is_int and 1 <= int(key.name) <= len(names):
                keys.append(int(key.name) - 1)
            elif isinstance(key, exp.Column) and key.name in names:
                keys.append(names.index(key.name))
            else:
                return exact
    elif isinstance(copy, exp.Select):
        if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
               for e in copy.expressions):
            return exact
        projections = list(copy.expressions)
        aliases = {e.alias: i for i, e in enumerate(projections) if e.alias}
        texts = {e.unalias().sql(): i for i, e in enumerate(projections)}
        appended: list[exp.Expression] = []
        for ordered in order.expressions:
            key = ordered.this
            if isinstance(key, exp.Literal) and key.is_int and 1 <= int(key.name) <= len(projections):
                keys.append(int(key.name) - 1)
            elif isinstance(key, exp.Column) and not key.table and key.name in aliases:
                keys.append(aliases[key.name])
            elif key.sql() in texts:
                keys.append(texts[key.sql()])
            else:
                appended.append(exp.alias_(key.copy(), f"_order_{len(appended) + 1}"))
                keys.append(-len(appended))
        if appended:
            if copy.args.get("distinct"):
                return exact
            copy.set("expressions", [*projections, *appended])
    else:
        return exact
    try:
        text = copy.sql(dialect=dialect)
    except SqlglotError:
        return exact
    return GoldPlan(text, ordered=True, keys=keys, appended=len([k for k in keys if k < 0]),
                    offset=offset or 0, limit=limit)


def _literal(node: exp.Expression | None) -> int | None:
    if node is None:
        return None
    value = node.expression if isinstance(node, exp.Limit | exp.Offset) else node
    if isinstance(value, exp.Literal) and value.is_int:
        return int(value.name)
    return None


def run_query(pair: Pair, conn: Any, sql: str, *, statements: list[exp.Expression] | None = None
              ) -> Result:
    """Run one of the pair's queries in the sandbox under the pair's limits, its time limit cut
    to what is left of the pair's evaluation budget. A query the budget stopped (or left
    unrun) gets status ``budget``: it did not exceed its own time limit.

    >>> from evalharness_sql.engines import SQLiteEngine
    >>> from evalharness_sql.verdict import Options
    >>> engine = SQLiteEngine.from_ddl("CREATE TABLE t (x INT)")
    >>> pair = Pair("SELECT 1", "SELECT 1", options=Options(budget_s=0.05))
    >>> slow = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT max(i) FROM n"
    >>> with pair.clock:
    ...     run_query(pair, engine.connect(), slow).status
    'budget'
    """
    opts = pair.options
    left = pair.clock.remaining()
    if left <= 0:
        return Result("budget", error=NOT_RUN)
    timeout = min(opts.timeout_s, left)
    result = run(conn, sql, dialect=pair.dialect, timeout_s=timeout, limits=opts.limits(),
                 statements=statements)
    if result.status == "timeout" and timeout < opts.timeout_s:
        result.status = "budget"
        result.error = (f"stopped after {result.elapsed_s:.3g} s, when the evaluation budget "
                        "ran out")
    return result


NOT_RUN = "not run: the evaluation budget had run out"


def budget_verdict(pair: Pair, stage: str, detail: str = "") -> Verdict:
    """The verdict of a pair whose evaluation budget ran out in ``stage``: undecided, with a
    reason that names the budget and what to change; also noted in ``pair.notes["budget"]``
    (the metrics not yet computed become errors with this reason)."""
    words = {"execute": "execute stage", "test_suite": "test-suite stage"}.get(stage, stage)
    budget = pair.options.budget_s
    reason = (f"undecided: evaluation budget of {budget:g} s exceeded in the {words}{detail}; "
              "raise budget_s, or lower test_suite_size or timeout_s")
    pair.notes["budget"] = reason
    return Verdict(None, stage, reason, details={"budget": {
        "budget_s": budget, "spent_s": round(pair.clock.elapsed(), 3), "stage": stage}})


def run_gold(pair: Pair, conn: Any, *, check: bool = False) -> tuple[Result, Ordering | None]:
    """Run the gold query by its plan; with ``check``, also run it as written and fall back
    to comparing lists exactly if the plan does not reproduce it. (With ``check`` — on the
    scenario's database — the time of the run of the query as written is noted for the
    execution time ratio.)"""
    plan = gold_plan(pair)
    result = run_query(pair, conn, plan.sql)
    if plan.sql == pair.gold:
        if check and result.ok:
            pair.notes["gold_as_written_s"] = result.elapsed_s
        return result, plan.ordering(len(result.columns)) if result.ok else None
    if (result.ok and not check) or result.status == "budget":
        return result, plan.ordering(len(result.columns)) if result.ok else None
    original = run_query(pair, conn, pair.gold)
    if original.ok:
        pair.notes["gold_as_written_s"] = original.elapsed_s
    if original.status == "budget":
        return original, None
    if result.ok and original.ok:
        ordering = plan.ordering(len(result.columns))
        same = compare(expected(result.rows, ordering), original.rows, len(original.columns),
                       len(original.columns), tolerance=pair.options.float_tolerance)
        if same.equal:
            pair.notes["gold_result_as_written"] = original
            return result, ordering
    # the plan failed or disagreed: compare with the gold query as written
    pair.notes["gold_plan"] = GoldPlan(pair.gold, ordered=plan.ordered)
    return original, pair.notes["gold_plan"].ordering(len(original.columns))


def visible(result: Result, ordering: Ordering | None) -> list[str]:
    return result.columns[: ordering.visible] if ordering else result.columns


def execute(pair: Pair) -> Verdict | None:
    """Run both queries on the scenario's database and compare the results (multisets, or
    lists when the gold query orders its rows; columns matched by content; floats within the
    tolerance; NULL equal to NULL). Decides *not equivalent* — with the differing rows as
    the counterexample — when the results differ, or when the prediction fails, times out or
    is refused while the gold query runs. Equal results decide nothing: one database can
    agree by luck.

    >>> from evalharness_sql.engines import SQLiteEngine
    >>> from evalharness_sql.stages.parse import parse
    >>> engine = SQLiteEngine.from_ddl("CREATE TABLE t (x INT); INSERT INTO t VALUES (1), (2)")
    >>> pair = Pair("SELECT x FROM t WHERE x > 1", "SELECT x FROM t WHERE x >= 1", engine=engine,
    ...             connection=engine.connect())
    >>> _ = parse(pair)
    >>> verdict = execute(pair)
    >>> verdict.equivalent, verdict.counterexample["only_in_predicted"]
    (False, [[1]])
    """
    if pair.connection is None or pair.predicted_sql is None:
        return None
    opts = pair.options
    where = pair.engine.describe() if pair.engine is not None else "the database"
    if pair.clock.remaining() <= 0:
        return budget_verdict(pair, "execute", " before the queries ran")
    gold, ordering = run_gold(pair, pair.connection, check=True)
    pair.gold_result = gold
    if gold.status == "budget":
        return budget_verdict(pair, "execute", f" (the gold query on {where}: {gold.error})")
    predicted = run_query(pair, pair.connection, pair.predicted_sql,
                          statements=[pair.predicted_tree] if pair.predicted_tree is not None
                          else None)
    pair.predicted_result = predicted
    if predicted.error != NOT_RUN:  # a query stopped by a limit was accepted by the engine
        pair.valid_sql = predicted.status in ("ok", "timeout", "too_many_rows", "too_large",
                                              "budget")
    if predicted.status == "budget":
        return budget_verdict(pair, "execute",
                              f" (the predicted query on {where}: {predicted.error})")
    if not gold.ok:
        pair.notes["gold_execution"] = gold.summary()
        if gold.status == "error":
            pair.gold_error = gold.error
        if predicted.status in ("refused",):
            return Verdict(False, "execute", predicted.error or "refused",
                           {"kind": "refused", "reason": predicted.error}, "refused")
        return None
    if not predicted.ok:
        return _failed(pair, predicted, gold, where)
    if opts.measure_time:
        pair.notes["timing"] = _timing(pair, predicted)
    n_gold, n_pred = len(visible(gold, ordering)), len(predicted.columns)
    comparison = compare(expected(gold.rows, ordering), predicted.rows, n_gold, n_pred,
                         tolerance=opts.float_tolerance)
    pair.execution_match = comparison.equal
    if not comparison.equal:
        category = "wrong_columns" if n_gold != n_pred else categorize(pair)
        return Verdict(False, "execute", f"different results on {where}: {comparison.reason}",
                       _counterexample(comparison, where, gold, predicted, ordering), category)
    pair.permutations = comparison.permutations
    return None


def _failed(pair: Pair, predicted: Result, gold: Result, where: str) -> Verdict:
    if predicted.status == "timeout":
        reason = (f"the predicted query was stopped after the {pair.options.timeout_s:g}s time "
                  f"limit on {where} (the gold query took {gold.elapsed_s:.3f}s)")
        return Verdict(False, "execute", reason, {"kind": "timeout", "database": where,
                                                  "time_limit_s": pair.options.timeout_s},
                       "timeout")
    if predicted.status in ("too_many_rows", "too_large"):
        return too_large_verdict(pair, "execute", predicted, where,
                                 f"the gold query returns {len(gold.rows)} rows")
    if predicted.status == "refused":
        return Verdict(False, "execute", predicted.error or "refused",
                       {"kind": "refused", "reason": predicted.error}, "refused")
    error = predicted.error or f"the engine reported {predicted.status} without a message"
    category = error_category(error)
    return Verdict(False, "execute", f"the predicted query fails on {where}: {error}",
                   {"kind": "error", "database": where, "error": error}, category)


def too_large_verdict(pair: Pair, stage: str, predicted: Result, where: str,
                      context: str) -> Verdict:
    """*Not equivalent*, category ``too_large``: the prediction passed a cap where the gold
    query runs. The reason names the cap (e.g. "the predicted query's value exceeds the 10 MB
    value cap (max_value_bytes) on ...") and what to change if the gold answer needs it."""
    limit = predicted.limit or ("max_rows" if predicted.status == "too_many_rows" else None)
    what = predicted.error or pair.options.limits().describe(limit or "max_result_bytes")
    hint = f"; raise {limit} if a right answer can be that large" if limit else ""
    reason = f"the predicted query's {what} on {where}, where {context}{hint}"
    return Verdict(False, stage, reason, {"kind": "too_large", "database": where,
                                          "limit": limit, "error": what}, "too_large")


def _counterexample(comparison: Comparison, where: str, gold: Result, predicted: Result,
                    ordering: Ordering | None) -> dict[str, Any]:
    return {"kind": "rows", "database": where, **comparison.counterexample(),
            "gold_columns": visible(gold, ordering), "predicted_columns": predicted.columns}


def _timing(pair: Pair, predicted: Result) -> dict[str, Any]:
    """Execution times of both queries on the scenario's database: the fastest of up to 5
    runs each, the execute stage's own run counted as the first (so a query slower than
    50 ms is not run again). Runs stop when the pair's budget runs out; ``complete`` says
    whether each query has a time."""
    first = {"gold": pair.notes.get("gold_as_written_s"), "predicted": predicted.elapsed_s}
    out: dict[str, Any] = {"complete": True}
    for name, sql in (("gold", pair.gold), ("predicted", pair.predicted_sql)):
        best = first[name] if first[name] is not None else math.inf
        spent = 0.0 if best == math.inf else best
        runs = 0 if best == math.inf else 1
        while runs < 5 and spent <= 0.05:
            start = time.perf_counter()
            result = run_query(pair, pair.connection, sql or "")
            took = time.perf_counter() - start
            if not result.ok:
                break
            best = min(best, result.elapsed_s)
            spent += took
            runs += 1
        out[f"{name}_s"] = best
        out["complete"] = out["complete"] and best != math.inf
    return out
