"""The error taxonomy: what kind of mistake a non-equivalent prediction makes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from evalharness_sql.memo import pair_clauses

if TYPE_CHECKING:
    from evalharness_sql.verdict import Pair

CATEGORIES = ("invalid_sql", "unknown_table", "unknown_column", "wrong_join", "wrong_filter",
              "wrong_aggregation", "wrong_columns", "ordering_limit", "too_large", "timeout",
              "refused", "other")
"""Every category, in the order the report lists them. ``too_large``: the prediction passed
a cap where the gold query runs — more rows than ``max_rows``, a value past
``max_value_bytes``, a result past ``max_result_bytes`` or memory past ``max_memory_bytes``
(its reason names the cap); such a result is never compared, so no clause is blamed."""


def error_category(message: str) -> str:
    """The category of an engine error message; ``other`` when there is no message (nothing
    says the SQL was invalid).

    >>> error_category("no such column: T1.nme"), error_category('near "FRM": syntax error')
    ('unknown_column', 'invalid_sql')
    >>> error_category("string or blob too big"), error_category("")
    ('too_large', 'other')
    """
    text = message.lower().strip()
    if not text:
        return "other"
    if "too big" in text or "out of memory" in text or ("exceeds the" in text and "cap" in text):
        return "too_large"
    if "no such table" in text or ("table" in text and "does not exist" in text) or \
            "catalog error: table" in text:
        return "unknown_table"
    if "no such column" in text or ("column" in text and "does not exist" in text) or \
            "referenced column" in text or "binder error" in text:
        return "unknown_column"
    if "not authorized" in text or text.startswith("refused"):
        return "refused"
    if "interrupted" in text or "timeout" in text:
        return "timeout"
    return "invalid_sql"


def categorize(pair: Pair) -> str:
    """The category of a prediction whose results differ from the gold query's: the first
    clause that differs decides (joins, then filters, then aggregation, then the selected
    columns, then ordering and limits).

    >>> from evalharness_sql.verdict import Pair
    >>> from evalharness_sql.stages.parse import parse
    >>> pair = Pair("SELECT name FROM t WHERE age > 30", "SELECT name FROM t WHERE age >= 30")
    >>> _ = parse(pair)
    >>> categorize(pair)
    'wrong_filter'
    """
    if pair.normal_forms is None:  # else both normal forms exist (their trees made lazily)
        gold = pair.gold_normal or pair.gold_tree
        pred = pair.predicted_normal or pair.predicted_tree
        if gold is None or pred is None:
            return "other"
    g, p = pair_clauses(pair)
    if g["from"] != p["from"]:
        return "wrong_join"
    if g["where"] != p["where"]:
        return "wrong_filter"
    if g["group_by"] != p["group_by"] or g["having"] != p["having"]:
        return "wrong_aggregation"
    if g["select"] != p["select"]:
        changed = (g["select"] - p["select"]) + (p["select"] - g["select"])
        if any(_has_aggregate(item, pair.dialect) for item in changed):
            return "wrong_aggregation"
        return "wrong_columns"
    if g["order_by"] != p["order_by"] or g["limit"] != p["limit"]:
        return "ordering_limit"
    return "other"


def _has_aggregate(sql: str, dialect: str) -> bool:
    import sqlglot
    from sqlglot.errors import SqlglotError

    try:
        return sqlglot.parse_one(sql.split(":")[-1], read=dialect).find(exp.AggFunc) is not None
    except (SqlglotError, ValueError):
        return False
