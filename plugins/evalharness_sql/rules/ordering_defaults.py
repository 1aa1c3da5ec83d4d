"""Spelled-out defaults: ``ASC``, ``INNER JOIN``, ``LEFT OUTER JOIN``."""

from __future__ import annotations

from sqlglot import exp


def ordering_defaults(tree: exp.Expression) -> exp.Expression:
    """Drop keywords that restate the default: ``ORDER BY x ASC`` is ``ORDER BY x``,
    ``INNER JOIN`` is ``JOIN``, ``LEFT OUTER JOIN`` is ``LEFT JOIN``.

    >>> import sqlglot
    >>> ordering_defaults(sqlglot.parse_one(
    ...     "SELECT a FROM t INNER JOIN u ON t.x = u.x LEFT OUTER JOIN v ON v.y = u.y ORDER BY a ASC")).sql()
    'SELECT a FROM t JOIN u ON t.x = u.x LEFT JOIN v ON v.y = u.y ORDER BY a'
    """
    for ordered in tree.find_all(exp.Ordered):
        if not ordered.args.get("desc"):
            ordered.set("desc", None)
    for join in tree.find_all(exp.Join):
        kind = (join.kind or "").upper()
        if kind == "INNER" or (kind == "OUTER" and join.side):
            join.set("kind", None)
    return tree
