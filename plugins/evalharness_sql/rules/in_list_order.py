"""An IN list is a set: sort it and drop repeats."""

from __future__ import annotations

from sqlglot import exp


def in_list_order(tree: exp.Expression) -> exp.Expression:
    """Sort the values of every IN list and remove duplicates.

    >>> import sqlglot
    >>> in_list_order(sqlglot.parse_one("SELECT a FROM t WHERE a IN (3, 1, 2, 1)")).sql()
    'SELECT a FROM t WHERE a IN (1, 2, 3)'
    """
    for node in tree.find_all(exp.In):
        if node.args.get("query") or node.args.get("unnest") or not node.expressions:
            continue
        unique = {e.sql(): e for e in node.expressions}
        node.set("expressions", [unique[k] for k in sorted(unique, key=_sort_key)])
    return tree


def _sort_key(sql: str) -> tuple[int, float, str]:
    try:
        return (0, float(sql), sql)
    except ValueError:
        return (1, 0.0, sql)
