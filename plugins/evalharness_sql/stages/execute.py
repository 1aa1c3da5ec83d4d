"""Stage 3, execute: run both queries in the sandbox on the scenario's database and compare."""

from __future__ import annotations

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


def run_gold(pair: Pair, conn: Any, *, check: bool = False) -> tuple[Result, Ordering | None]:
    """Run the gold query by its plan; with ``check``, also run it as written and fall back
    to comparing lists exactly if the plan does not reproduce it."""
    opts = pair.options
    plan = gold_plan(pair)
    result = run(conn, plan.sql, dialect=pair.dialect, timeout_s=opts.timeout_s,
                 max_rows=opts.max_rows)
    if plan.sql == pair.gold:
        return result, plan.ordering(len(result.columns)) if result.ok else None
    if result.ok and not check:
        return result, plan.ordering(len(result.columns))
    original = run(conn, pair.gold, dialect=pair.dialect, timeout_s=opts.timeout_s,
                   max_rows=opts.max_rows)
    if result.ok and original.ok:
        ordering = plan.ordering(len(result.columns))
        same = compare(expected(result.rows, ordering), original.rows, len(original.columns),
                       len(original.columns), tolerance=opts.float_tolerance)
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
    gold, ordering = run_gold(pair, pair.connection, check=True)
    pair.gold_result = gold
    predicted = run(pair.connection, pair.predicted_sql, dialect=pair.dialect,
                    timeout_s=opts.timeout_s, max_rows=opts.max_rows,
                    statements=[pair.predicted_tree] if pair.predicted_tree is not None else None)
    pair.predicted_result = predicted
    pair.valid_sql = predicted.status in ("ok", "timeout", "too_many_rows")
    where = pair.engine.describe() if pair.engine is not None else "the database"
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
        pair.notes["timing"] = _timing(pair)
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
    if predicted.status == "too_many_rows":
        reason = (f"the predicted query returns more than {pair.options.max_rows} rows on "
                  f"{where}; the gold query returns {len(gold.rows)}")
        return Verdict(False, "execute", reason, {"kind": "row_cap", "database": where,
                                                  "gold_rows": len(gold.rows)},
                       categorize(pair))
    if predicted.status == "refused":
        return Verdict(False, "execute", predicted.error or "refused",
                       {"kind": "refused", "reason": predicted.error}, "refused")
    category = error_category(predicted.error or "")
    return Verdict(False, "execute", f"the predicted query fails on {where}: {predicted.error}",
                   {"kind": "error", "database": where, "error": predicted.error}, category)


def _counterexample(comparison: Comparison, where: str, gold: Result, predicted: Result,
                    ordering: Ordering | None) -> dict[str, Any]:
    return {"kind": "rows", "database": where, **comparison.counterexample(),
            "gold_columns": visible(gold, ordering), "predicted_columns": predicted.columns}


def _timing(pair: Pair) -> dict[str, float]:
    """Execution times of both queries: the fastest of a few runs, for a stable ratio."""
    out = {}
    for name, sql in (("gold", pair.gold), ("predicted", pair.predicted_sql)):
        best = float("inf")
        spent = 0.0
        for _ in range(5):
            start = time.perf_counter()
            result = run(pair.connection, sql or "", dialect=pair.dialect,
                         timeout_s=pair.options.timeout_s, max_rows=pair.options.max_rows)
            took = time.perf_counter() - start
            if not result.ok:
                break
            best = min(best, result.elapsed_s)
            spent += took
            if spent > 0.05:
                break
        out[f"{name}_s"] = best
    return out
