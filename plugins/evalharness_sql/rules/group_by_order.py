"""Grouping keys form a set: sort them."""

from __future__ import annotations

from sqlglot import exp


def group_by_order(tree: exp.Expression) -> exp.Expression:
    """Sort the expressions of every plain ``GROUP BY`` and drop repeats.

    >>> import sqlglot
    >>> group_by_order(sqlglot.parse_one("SELECT b, a, COUNT(*) FROM t GROUP BY b, a, b")).sql()
    'SELECT b, a, COUNT(*) FROM t GROUP BY a, b'
    """
    for group in tree.find_all(exp.Group):
        if any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets", "totals", "all")):
            continue
        unique = {e.sql(): e for e in group.expressions}
        group.set("expressions", [unique[k] for k in sorted(unique)])
    return tree
