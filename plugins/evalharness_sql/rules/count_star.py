"""``COUNT(1)``, and ``COUNT(col)`` of a column that cannot be NULL, are ``COUNT(*)``."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from evalharness_sql.lineage import column_tables, enclosing_select, outer_join_tables
from evalharness_sql.schema import Schema


def count_star(tree: exp.Expression, schema: Schema | None,
               state: dict[str, Any]) -> exp.Expression:
    """Rewrite counts that count every row as ``COUNT(*)``: the count of a non-NULL constant,
    and the count of a ``NOT NULL`` or primary-key column when the SELECT has no outer join
    (which could pad that column with NULLs). ``COUNT(DISTINCT ...)`` is left alone.

    >>> import sqlglot
    >>> from evalharness_sql.engines import SQLiteEngine
    >>> schema = SQLiteEngine.from_ddl("CREATE TABLE t (id INT PRIMARY KEY, x INT)").schema()
    >>> tree = sqlglot.parse_one("SELECT COUNT(1), COUNT(t.id), COUNT(t.x) FROM t AS t")
    >>> count_star(tree, schema, {"qualified": True}).sql()
    'SELECT COUNT(*), COUNT(*), COUNT(t.x) FROM t AS t'
    """
    tables = column_tables(tree) if schema is not None and state.get("qualified") else {}
    for count in list(tree.find_all(exp.Count)):
        arg = count.this
        if arg is None or isinstance(arg, exp.Star | exp.Distinct):
            continue
        if isinstance(arg, exp.Literal) or (isinstance(arg, exp.Boolean)):
            count.set("this", exp.Star())
        elif isinstance(arg, exp.Column) and id(arg) in tables and schema is not None:
            column = schema.column(tables[id(arg)], arg.name)
            select = enclosing_select(count)
            if column is not None and column.notnull and select is not None \
                    and not outer_join_tables(select) and _same_scope(arg, select):
                count.set("this", exp.Star())
    return tree


def _same_scope(column: exp.Column, select: exp.Select) -> bool:
    """The column belongs to a table of this SELECT (not an outer query's, which an outer
    join there could have made NULL)."""
    names = {s.alias_or_name for s in select.find_all(exp.Table)
             if enclosing_select(s) is select}
    return column.table in names
