"""The text-to-SQL evaluators' work, separate from their declaration: a batch's
``exact_match`` rows (normal forms compared), its ``equivalence`` rows (the cascade run on
each pair, identical pairs once, with execution accuracy, valid SQL, clause F1 and the
execution time ratio), and the text-to-SQL oracle's output (the gold SQL run in the
sandbox). The package's ``__init__`` declares and registers them; this module never imports
it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlglot.errors import SqlglotError

from evalharness import MetricValue
from evalharness.errors import NoOracle
from evalharness_sql.cascade import run_cascade
from evalharness_sql.clauses import items_f1
from evalharness_sql.engines import Column, Schema, Table, open_engine
from evalharness_sql.memo import (
    engine_key,
    memo_for,
    normal_form_entry,
    pair_clauses,
    prefetch_normal_forms,
)
from evalharness_sql.rules import normalize
from evalharness_sql.sandbox import parse_statements
from evalharness_sql.sandbox import run as run_in_sandbox
from evalharness_sql.settings import EquivalenceSettings, ExactMatchSettings
from evalharness_sql.stages.execute import execute
from evalharness_sql.verdict import Options, Pair

EQUIVALENCE_METRICS = ["equivalent", "execution_accuracy", "valid_sql", "clause_f1",
                       "exec_time_ratio"]
"""The metrics of an ``equivalence`` row, in the order the evaluator declares them."""


def normal_form(sql: str, dialect: str = "sqlite", schema: Schema | dict | None = None) -> str:
    """A canonical rendering of one SQL statement (what ``exact_match`` compares).

    Identifiers are normalised (case, quoting), and with a schema every column is qualified
    with its table, table aliases are canonical and output aliases dropped, so that cosmetic
    differences vanish; the normalisation rules then remove the differences that do not
    change the result (IN-list order, ``COUNT(1)``, a one-value ``IN``, ...).

    >>> normal_form("select NAME from Products where price<10")
    'SELECT name FROM products WHERE price < 10'
    >>> schema = {"products": {"name": "TEXT", "price": "REAL"}}
    >>> normal_form("SELECT name FROM products p", schema=schema) == \\
    ...     normal_form("select products.name from products", schema=schema)
    True
    """
    statements = parse_statements(sql, dialect)
    if len(statements) != 1:
        raise SqlglotError(f"expected one statement, found {len(statements)}")
    if isinstance(schema, dict):
        schema = Schema({t.lower(): Table(t, [Column(c, ty) for c, ty in cols.items()])
                         for t, cols in schema.items()})
    tree = normalize(statements[0], schema=schema, dialect=dialect)
    return tree.sql(dialect=dialect, comments=False)


def _dialect(settings: Any, context: Any) -> str:
    database = getattr(context, "database", None)
    return getattr(settings, "dialect", None) or (database.dialect if database is not None else "sqlite")


def exact_match_rows(batch: Sequence[tuple[Any, Any]], settings: ExactMatchSettings,
                     context: Any) -> list[dict[str, MetricValue]]:
    """The ``exact_match`` row of each ``(case, step)`` pair: 1 when the normal forms of the
    predicted and gold SQL are the same."""
    dialect = _dialect(settings, context)
    engine = open_engine(context.database) if context.database is not None else None
    prefetch_normal_forms([s for case, step in batch for s in (case.gold.sql, step.sql)],
                          dialect, engine)
    rows = []
    for case, step in batch:
        if not case.gold.sql:
            rows.append({"exact_match": MetricValue.failed("the case has no gold SQL (gold.sql)")})
            continue
        try:  # normal forms are computed once per query text and database (memo.py)
            gold = normal_form_entry(case.gold.sql, dialect, engine).sql
        except SqlglotError as exc:
            rows.append({"exact_match": MetricValue.failed(
                f"the gold SQL does not parse as {dialect}: {str(exc).splitlines()[0]}")})
            continue
        if not step.sql:
            rows.append({"exact_match": MetricValue.of(False, reason="no SQL was produced")})
            continue
        try:
            pred = normal_form_entry(step.sql, dialect, engine).sql
        except SqlglotError as exc:
            rows.append({"exact_match": MetricValue.of(
                False, reason=f"predicted SQL does not parse: {str(exc).splitlines()[0]}")})
            continue
        rows.append({"exact_match": MetricValue.of(pred == gold, gold=gold, predicted=pred)})
    return rows


def equivalence_rows(batch: Sequence[tuple[Any, Any]], settings: EquivalenceSettings,
                     context: Any) -> list[dict[str, MetricValue]]:
    """The :data:`EQUIVALENCE_METRICS` row of each ``(case, step)`` pair: the cascade's
    verdict and the execution metrics, identical pairs evaluated once."""
    dialect = _dialect(settings, context)
    database = context.database
    judge = context.judge if settings.use_judge else None
    options = Options(timeout_s=settings.timeout_s, max_rows=settings.max_rows,
                      max_value_bytes=settings.max_value_bytes,
                      max_result_bytes=settings.max_result_bytes,
                      max_memory_bytes=settings.max_memory_bytes,
                      budget_s=getattr(context, "budget_s", None),
                      test_suite_size=settings.test_suite_size, seed=settings.seed,
                      float_tolerance=settings.float_tolerance, judge=judge, measure_time=True)
    engine = open_engine(database) if database is not None else None
    if settings.predicted_dialect in (None, dialect):
        prefetch_normal_forms([s for case, step in batch for s in (case.gold.sql, step.sql)],
                              dialect, engine)
    # Identical pairs are evaluated once (on this database, with these settings) unless an
    # LLM judge may be asked: then each case's request and its accounting stay its own.
    deterministic = judge is None or getattr(judge, "is_llm", True) is False
    memo = memo_for(engine, "equivalence") if engine is not None and deterministic else None
    pairs: list[Pair | None] = []
    keys: list[Any] = []
    for case, step in batch:
        if case.gold.sql and step.sql:
            pair = Pair(case.gold.sql, step.sql, dialect=dialect,
                        predicted_dialect=settings.predicted_dialect, engine=engine,
                        options=options)
            pairs.append(pair)
            keys.append(pair_key(pair) if memo is not None else None)
        else:
            pairs.append(None)
            keys.append(None)
    # A pair identical to one already evaluated gets a copy of its values: the cascade's
    # outcome is a function of exactly what the key holds.
    known: dict[int, dict[str, MetricValue]] = {}
    first: dict[Any, int] = {}
    todo = []
    for i, (pair, key) in enumerate(zip(pairs, keys, strict=True)):
        if pair is None:
            continue
        if key is not None:
            row = memo.get(key, None) if memo is not None else None
            if row is not None:
                known[i] = row
                continue
            if key in first:
                continue
            first[key] = i
        todo.append(pair)
    if todo:
        conn = None
        if engine is not None:
            try:
                conn = engine.connect(limits=options.limits())
            except Exception as exc:  # noqa: BLE001 - recorded as the reason, run goes on
                for p in todo:
                    p.notes["connect"] = f"{type(exc).__name__}: {exc}"
        try:
            for p in todo:
                p.connection = conn
            run_cascade(todo)
            for p in todo:  # execution accuracy and timing even where an earlier stage decided
                if conn is not None and p.gold_result is None and p.predicted_sql is not None \
                        and "budget" not in p.notes:
                    with p.clock:
                        execute(p)
        finally:
            for p in todo:
                p.connection = None
            if conn is not None:
                conn.close()
    rows = []
    for i, ((case, step), pair, key) in enumerate(zip(batch, pairs, keys, strict=True)):
        if not case.gold.sql:
            reason = "the case has no gold SQL (gold.sql)"
            rows.append({m: MetricValue.failed(reason) for m in EQUIVALENCE_METRICS})
        elif pair is None:
            rows.append(_no_sql(step))
        elif i in known:
            rows.append(_copy(known[i]))
        elif key is not None and first.get(key) != i:
            rows.append(_copy(rows[first[key]]))
        else:
            row = _metrics(pair, database is not None)
            if key is not None and _memoisable(pair):
                memo.put(key, _copy(row))
            rows.append(row)
    return rows


def pair_key(pair: Pair) -> tuple:
    """What the cascade's outcome for a pair is a function of: both SQL texts, the dialects,
    the database (its file fingerprint), every option (the budget too), and the judge's
    identity."""
    o = pair.options
    judge = o.judge
    who = None if judge is None else (type(judge).__qualname__, getattr(judge, "backend", None),
                                      getattr(judge, "model", None),
                                      getattr(judge, "is_llm", True))
    return (pair.gold, pair.predicted, pair.dialect, pair.predicted_dialect,
            engine_key(pair.engine), o.timeout_s, o.max_rows, o.max_value_bytes,
            o.max_result_bytes, o.max_memory_bytes, o.budget_s, o.test_suite_size, o.seed,
            o.float_tolerance, o.measure_time, o.stages, who)


def _memoisable(pair: Pair) -> bool:
    """Whether a pair's values may stand for an identical pair's in a later batch: not when
    the database could not be opened (it may open next time), nor when the evaluation budget
    ran out (how far a pair gets depends on the machine's load)."""
    return "connect" not in pair.notes and "budget" not in pair.notes


def _copy(row: dict[str, MetricValue]) -> dict[str, MetricValue]:
    return {name: value.model_copy(deep=True) for name, value in row.items()}


def _no_sql(step: Any) -> dict[str, MetricValue]:
    reason = "no SQL was produced" + (f" ({step.error})" if getattr(step, "error", None) else "")
    details = {"stage": "parse", "reason": reason, "counterexample": {"kind": "no_sql"},
               "category": "invalid_sql"}
    return {"equivalent": MetricValue(value=0.0, details=details),
            "execution_accuracy": MetricValue.of(False, reason=reason),
            "valid_sql": MetricValue.of(False, reason=reason),
            "clause_f1": MetricValue.of(0.0, reason=reason),
            "exec_time_ratio": MetricValue.failed(reason)}


def _metrics(pair: Pair, has_database: bool) -> dict[str, MetricValue]:
    verdict = pair.verdict
    assert verdict is not None
    details = {k: v for k, v in verdict.to_dict().items() if k not in ("equivalent",)}
    judge_record = details.pop("details", {})
    if judge_record:
        details.update(judge_record)
    if verdict.equivalent is None:
        equivalent = MetricValue(error=verdict.reason, details=details)
    else:
        equivalent = MetricValue(value=float(verdict.equivalent), details=details)
    budget = pair.notes.get("budget")
    return {"equivalent": equivalent,
            "execution_accuracy": _execution_accuracy(pair, has_database),
            "valid_sql": (MetricValue.of(bool(pair.valid_sql)) if pair.valid_sql is not None
                          else MetricValue.failed(budget or
                                                  "the prediction could not be checked")),
            "clause_f1": _clause_f1(pair),
            "exec_time_ratio": _time_ratio(pair)}


def _execution_accuracy(pair: Pair, has_database: bool) -> MetricValue:
    if not has_database:
        return MetricValue.failed("the scenario has no database")
    if pair.execution_match is not None:
        return MetricValue.of(pair.execution_match)
    budget = pair.notes.get("budget")
    if budget and (pair.gold_result is None or pair.gold_result.status == "budget" or
                   pair.predicted_result is None or pair.predicted_result.status == "budget"):
        return MetricValue.failed(budget)
    if pair.gold_result is not None and not pair.gold_result.ok:
        return MetricValue.failed(f"the gold query does not run: {pair.gold_result.summary()}")
    if pair.predicted_result is not None and not pair.predicted_result.ok:
        return MetricValue.of(False, reason=pair.predicted_result.summary())
    if pair.verdict is not None and pair.verdict.stage == "parse":
        return MetricValue.of(False, reason=pair.verdict.reason)
    return MetricValue.failed("the queries were not executed"
                              + (f" ({pair.notes['connect']})" if "connect" in pair.notes else ""))


def _clause_f1(pair: Pair) -> MetricValue:
    if pair.normal_forms is None:  # else both normal forms exist (their trees made lazily)
        if (pair.gold_normal or pair.gold_tree) is None:
            return MetricValue.failed(pair.notes.get("gold_parse", "the gold SQL does not parse"))
        if (pair.predicted_normal or pair.predicted_tree) is None:
            return MetricValue.of(0.0, reason="the predicted SQL does not parse")
    try:
        mean, per = items_f1(*pair_clauses(pair))
    except (SqlglotError, ValueError, TypeError) as exc:
        return MetricValue.failed(f"clause comparison failed: {exc}")
    return MetricValue.of(mean, clauses={k: round(v, 4) for k, v in per.items()})


def _time_ratio(pair: Pair) -> MetricValue:
    timing = pair.notes.get("timing")
    if "budget" in pair.notes and not (timing and timing.get("complete")):
        return MetricValue.failed(pair.notes["budget"])
    if not timing:
        if pair.predicted_result is not None and not pair.predicted_result.ok:
            return MetricValue.failed(f"the predicted query did not run to the end "
                                      f"({pair.predicted_result.status})")
        return MetricValue.failed("the queries were not both executed")
    gold, pred = timing.get("gold_s", float("inf")), timing.get("predicted_s", float("inf"))
    if gold == float("inf") or pred == float("inf"):
        return MetricValue.failed("the queries were not both executed")
    ratio = max(pred, 1e-7) / max(gold, 1e-7)
    return MetricValue.of(ratio, gold_ms=round(gold * 1000, 4), predicted_ms=round(pred * 1000, 4))


ORACLE_MAX_ROWS = 10_000
"""Most rows of the gold query handed to a system as its text-to-SQL oracle output."""


def oracle_output(case: Any, context: Any) -> dict[str, Any]:
    """A perfect text-to-SQL step writes the gold query and gets its rows: the gold SQL is run
    in the sandbox on the scenario's database (for oracle headroom)."""
    if not case.gold.sql:
        raise NoOracle("the case has no gold SQL (gold.sql)")
    if context.database is None:
        raise NoOracle("the scenario has no database to run the gold SQL on")
    engine = open_engine(context.database)
    conn = engine.connect()
    try:
        result = run_in_sandbox(conn, case.gold.sql, dialect=_dialect(None, context),
                                max_rows=ORACLE_MAX_ROWS)
    finally:
        conn.close()
    if not result.ok:
        raise NoOracle(f"the gold SQL does not run on the database: {result.summary()}")
    return {"sql": case.gold.sql, "columns": list(result.columns),
            "rows": [list(row) for row in result.rows]}

