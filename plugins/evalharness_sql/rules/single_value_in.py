"""``x IN (v)`` is ``x = v``; ``x NOT IN (v)`` is ``x <> v``."""

from __future__ import annotations

from sqlglot import exp


def single_value_in(tree: exp.Expression) -> exp.Expression:
    """Rewrite a one-value IN list as an equality (three-valued logic agrees: both are NULL
    when either side is NULL).

    >>> import sqlglot
    >>> single_value_in(sqlglot.parse_one("SELECT a FROM t WHERE a IN (1) AND b NOT IN ('x')")).sql()
    "SELECT a FROM t WHERE a = 1 AND NOT b = 'x'"
    """
    for node in list(tree.find_all(exp.In)):
        if node.args.get("query") or node.args.get("unnest") or len(node.expressions) != 1:
            continue
        node.replace(exp.EQ(this=node.this, expression=node.expressions[0]))
    return tree
