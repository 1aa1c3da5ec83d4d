"""SQLite's comparison affinity, made explicit: a number compared with a TEXT column is text."""

from __future__ import annotations

import re
from typing import Any

from sqlglot import exp

from evalharness_sql.lineage import column_tables
from evalharness_sql.schema import Schema

_INT = re.compile(r"^[+-]?\d+$")
_DECIMAL = re.compile(r"^[+-]?\d*\.\d+$")
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)


def affinity_literals(tree: exp.Expression, schema: Schema | None, dialect: str,
                      state: dict[str, Any]) -> exp.Expression:
    """Rewrite literals compared with a column into the type SQLite converts them to
    before comparing ("Datatypes In SQLite", 4.2): an integer compared with a TEXT column
    becomes text, and a numeric string compared with an INTEGER, REAL or NUMERIC column
    becomes a number. ``year = 2014`` and ``year = '2014'`` are then one query when ``year``
    is TEXT — and stay two when it is not.

    >>> import sqlglot
    >>> from evalharness_sql.engines import SQLiteEngine
    >>> schema = SQLiteEngine.from_ddl("CREATE TABLE c (year TEXT, age INT)").schema()
    >>> tree = sqlglot.parse_one("SELECT 1 FROM c AS c WHERE c.year = 2014 AND c.age > '30'")
    >>> affinity_literals(tree, schema, "sqlite", {"qualified": True}).sql()
    "SELECT 1 FROM c AS c WHERE c.year = '2014' AND c.age > 30"
    """
    if dialect != "sqlite" or schema is None or not state.get("qualified"):
        return tree
    tables = column_tables(tree)

    def affinity(node: exp.Expression) -> str | None:
        if not isinstance(node, exp.Column) or id(node) not in tables:
            return None
        column = schema.column(tables[id(node)], node.name)
        return column.affinity if column is not None else None

    for node in list(tree.find_all(*_COMPARISONS, exp.In, exp.Between)):
        if isinstance(node, exp.In):
            aff = affinity(node.this)
            if aff and not node.args.get("query"):
                for item in node.expressions:
                    _convert(item, aff)
        elif isinstance(node, exp.Between):
            aff = affinity(node.this)
            if aff:
                _convert(node.args.get("low"), aff)
                _convert(node.args.get("high"), aff)
        else:
            left, right = node.this, node.expression
            if isinstance(right, exp.Literal) and (aff := affinity(left)):
                _convert(right, aff)
            elif isinstance(left, exp.Literal) and (aff := affinity(right)):
                _convert(left, aff)
    return tree


def _convert(node: exp.Expression | None, affinity: str) -> None:
    if not isinstance(node, exp.Literal):
        return
    if affinity == "TEXT" and not node.is_string and _INT.match(node.name):
        node.replace(exp.Literal.string(str(int(node.name))))
    elif affinity in ("INTEGER", "REAL", "NUMERIC") and node.is_string:
        text = node.name.strip()
        if _INT.match(text):
            node.replace(exp.Literal.number(int(text)))
        elif _DECIMAL.match(text) and affinity != "INTEGER":
            node.replace(exp.Literal.number(text))
