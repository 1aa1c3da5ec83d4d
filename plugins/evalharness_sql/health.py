"""The ``sql_health`` evaluator: what can be said of a text-to-SQL step without gold SQL —
does the query parse, did it return rows, how long it took (for ``evalharness monitor``,
docs/monitor.md).

A step that failed (an execution error recorded on the step) never reaches an evaluator: its
metrics are errors naming the failure, and the monitor's verdict counts it as a failure.
"""

from __future__ import annotations

from typing import Any

import sqlglot
from sqlglot.errors import SqlglotError

from evalharness.models import MetricValue
from evalharness_sql.settings import HealthSettings

HEALTH_METRICS = ["sql_parses", "empty_result", "result_rows", "latency_ms"]


def parses(sql: str, dialect: str) -> str | None:
    """``None`` when ``sql`` is one statement that parses in ``dialect``, else why not.

    >>> parses("SELECT name FROM products WHERE price < 60", "sqlite") is None
    True
    >>> parses("SELEC name FROM", "sqlite") is not None
    True
    """
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except SqlglotError as exc:
        return f"does not parse: {str(exc).splitlines()[0][:200]}"
    if len(statements) != 1:
        return f"{len(statements)} statements; one query was expected"
    return None


def health_rows(batch: Any, settings: HealthSettings, context: Any
                ) -> list[dict[str, MetricValue]]:
    """The :data:`HEALTH_METRICS` of each ``(case, Text2SQLStep)`` pair (no gold read)."""
    database = getattr(context, "database", None)
    dialect = settings.dialect or getattr(database, "dialect", None) or "sqlite"
    rows = []
    for _, step in batch:
        sql = (step.sql or "").strip()
        latency = (MetricValue.of(step.latency_ms) if step.latency_ms is not None else
                   MetricValue.failed("the text2sql step reports no latency_ms"))
        if not sql:
            rows.append({"sql_parses": MetricValue.of(False, reason="no SQL was produced"),
                         "empty_result": MetricValue.failed("no SQL was produced"),
                         "result_rows": MetricValue.failed("no SQL was produced"),
                         "latency_ms": latency})
            continue
        problem = parses(sql, dialect)
        row = {"sql_parses": MetricValue.of(problem is None, dialect=dialect,
                                            **({"reason": problem} if problem else {}))}
        if step.rows is None:
            missing = "the step records no result rows"
            row["empty_result"] = MetricValue.failed(missing)
            row["result_rows"] = MetricValue.failed(missing)
        else:
            row["empty_result"] = MetricValue.of(len(step.rows) == 0)
            row["result_rows"] = MetricValue.of(len(step.rows))
        row["latency_ms"] = latency
        rows.append(row)
    return rows
