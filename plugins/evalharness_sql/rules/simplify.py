"""sqlglot's ``simplify``, minus the rewrites that are unsafe under SQLite's typing."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.simplify import Simplifier

_KEPT = "EVALHARNESS_KEPT_"


def _unsafe(node: exp.Expression) -> bool:
    """A comparison sqlglot would solve for a column (``x + 1 = 3`` -> ``x = 2``: wrong for
    TEXT values in SQLite and for floats), or a date truncation it would fold (other engines'
    semantics)."""
    if isinstance(node, Simplifier.COMPARISONS):
        return any(type(side) in Simplifier.INVERSE_OPS for side in (node.left, node.right))
    return isinstance(node, Simplifier.DATETRUNCS)


def simplify(tree: exp.Expression, dialect: str) -> exp.Expression:
    """Boolean and constant simplification: ``BETWEEN`` to two comparisons, constants to the
    right of comparisons, ``NOT`` pushed into comparisons, connectors flattened, deduplicated
    and sorted, implied comparisons absorbed (``x > 5 AND x > 3`` is ``x > 5``), constant
    arithmetic folded. NULL-sensitive rewrites are done only where sqlglot knows the operand
    is not NULL.

    The comparisons sqlglot would move arithmetic across, and date truncations, are set
    aside while it runs (each replaced by a placeholder, one per distinct text, then put
    back): sqlglot's simplifier may be compiled (``sqlglot[c]``), and a compiled class cannot
    be subclassed to leave those rewrites out.

    >>> import sqlglot
    >>> simplify(sqlglot.parse_one("SELECT a FROM t WHERE NOT x > 5 AND 1 = 1 AND x BETWEEN 1 AND 9"),
    ...          "sqlite").sql()
    'SELECT a FROM t WHERE x <= 5 AND x >= 1'
    >>> simplify(sqlglot.parse_one("SELECT a FROM t WHERE x + 1 = 3"), "sqlite").sql()
    'SELECT a FROM t WHERE x + 1 = 3'
    >>> simplify(sqlglot.parse_one("SELECT a FROM t WHERE 3 = x - 1 AND 3 = x - 1 AND y > 2"),
    ...          "sqlite").sql()
    'SELECT a FROM t WHERE 3 = x - 1 AND y > 2'
    """
    kept: dict[str, exp.Expression] = {}
    names: dict[str, str] = {}

    def set_aside(node: exp.Expression) -> exp.Expression:
        if not _unsafe(node):
            return node
        text = node.sql(dialect=dialect)
        name = names.setdefault(text, f"{_KEPT}{len(names)}")
        kept[name] = node
        return exp.Anonymous(this=name)

    def put_back(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Anonymous) and node.name in kept:
            return kept[node.name].copy()
        return node

    tree = tree.transform(set_aside, copy=False)
    tree = Simplifier(dialect=dialect).simplify(tree)
    return tree.transform(put_back, copy=False) if kept else tree
