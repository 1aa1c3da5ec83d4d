"""Output column names and order do not matter: drop the aliases, sort the projections."""

from __future__ import annotations

from typing import Any

from sqlglot import exp


def output_columns(tree: exp.Expression, state: dict[str, Any]) -> exp.Expression:
    """In the outermost SELECT of a qualified query (whose ``ORDER BY`` no longer refers to
    output aliases or positions), remove the projections' aliases and sort the projections by
    their SQL text. Results are compared with columns matched by content, so neither the
    names nor the order of output columns changes the answer.

    >>> import sqlglot
    >>> output_columns(sqlglot.parse_one("SELECT t.b AS y, t.a AS x FROM t AS t"),
    ...                {"qualified": True}).sql()
    'SELECT t.a, t.b FROM t AS t'
    """
    if not state.get("qualified") or not isinstance(tree, exp.Select):
        return tree
    order = tree.args.get("order")
    if order and any(isinstance(o.this, exp.Literal) or (
            isinstance(o.this, exp.Column) and not o.this.table) for o in order.expressions):
        return tree
    projections = [e.unalias() if isinstance(e, exp.Alias) else e for e in tree.expressions]
    projections.sort(key=lambda e: e.sql())
    tree.set("expressions", projections)
    return tree
