"""Which base table each column of a qualified query comes from (through sqlglot's scopes)."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, build_scope


def column_tables(tree: exp.Expression) -> dict[int, str]:
    """``id(column node) -> base table name`` for every column of a qualified query that
    reads a base table directly (columns of derived tables and CTEs are left out).

    >>> import sqlglot
    >>> tree = sqlglot.parse_one("SELECT s.name FROM singer AS s WHERE EXISTS "
    ...                          "(SELECT 1 FROM concert AS c WHERE c.singer_id = s.id)")
    >>> sorted(f"{c.sql()}->{column_tables(tree)[id(c)]}" for c in tree.find_all(exp.Column))
    ['c.singer_id->concert', 's.id->singer', 's.name->singer']
    """
    out: dict[int, str] = {}
    try:
        root = build_scope(tree)
    except (SqlglotError, KeyError, AttributeError, TypeError, ValueError):
        return out
    if root is None:
        return out
    for scope in root.traverse():
        for column in scope.columns:
            source = _source(scope, column.table)
            if isinstance(source, exp.Table):
                out[id(column)] = source.name
    return out


def _source(scope: Scope | None, name: str) -> object:
    while scope is not None and name:
        source = scope.sources.get(name)
        if source is not None:
            return source
        scope = scope.parent
    return None


def outer_join_tables(select: exp.Select) -> bool:
    """Whether this SELECT has an outer (LEFT/RIGHT/FULL) join, which can make any column NULL.

    >>> import sqlglot
    >>> outer_join_tables(sqlglot.parse_one("SELECT 1 FROM a LEFT JOIN b ON a.x = b.x"))
    True
    """
    return any(j.side for j in select.args.get("joins") or ())


def enclosing_select(node: exp.Expression) -> exp.Select | None:
    """The nearest SELECT a node belongs to."""
    parent = node.parent
    while parent is not None and not isinstance(parent, exp.Select):
        parent = parent.parent
    return parent
