"""sqlglot's ``simplify``, minus the rewrites that are unsafe under SQLite's typing."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.simplify import Simplifier


class SafeSimplifier(Simplifier):
    """sqlglot's simplifier without the rewrites that move arithmetic across a comparison
    (``x + 1 = 3`` -> ``x = 2``: wrong for TEXT values in SQLite and for floats) and without
    date truncation rewrites (other engines' semantics)."""

    def simplify_equality(self, expression: exp.Expression) -> exp.Expression:
        return expression

    def simplify_datetrunc(self, expression: exp.Expression) -> exp.Expression:
        return expression


def simplify(tree: exp.Expression, dialect: str) -> exp.Expression:
    """Boolean and constant simplification: ``BETWEEN`` to two comparisons, constants to the
    right of comparisons, ``NOT`` pushed into comparisons, connectors flattened, deduplicated
    and sorted, implied comparisons absorbed (``x > 5 AND x > 3`` is ``x > 5``), constant
    arithmetic folded. NULL-sensitive rewrites are done only where sqlglot knows the operand
    is not NULL.

    >>> import sqlglot
    >>> simplify(sqlglot.parse_one("SELECT a FROM t WHERE NOT x > 5 AND 1 = 1 AND x BETWEEN 1 AND 9"),
    ...          "sqlite").sql()
    'SELECT a FROM t WHERE x <= 5 AND x >= 1'
    >>> simplify(sqlglot.parse_one("SELECT a FROM t WHERE x + 1 = 3"), "sqlite").sql()
    'SELECT a FROM t WHERE x + 1 = 3'
    """
    return SafeSimplifier(dialect=dialect).simplify(tree)
