"""``a = b`` is ``b = a``: order the two sides of symmetric comparisons."""

from __future__ import annotations

from sqlglot import exp


def symmetric_comparisons(tree: exp.Expression) -> exp.Expression:
    """Order the operands of ``=``, ``<>`` and ``IS NOT DISTINCT FROM`` by their SQL text when
    neither is a constant (constants stay on the right).

    >>> import sqlglot
    >>> symmetric_comparisons(sqlglot.parse_one("SELECT 1 FROM a, b WHERE b.y = a.x")).sql()
    'SELECT 1 FROM a, b WHERE a.x = b.y'
    """
    for node in tree.find_all(exp.EQ, exp.NEQ, exp.NullSafeEQ, exp.NullSafeNEQ):
        left, right = node.this, node.expression
        if isinstance(left, exp.Literal) or isinstance(right, exp.Literal):
            continue
        if left.sql() > right.sql():
            node.set("this", right)
            node.set("expression", left)
    return tree
