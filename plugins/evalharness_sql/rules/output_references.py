"""``ORDER BY`` an output alias or position means ``ORDER BY`` that expression."""

from __future__ import annotations

from typing import Any

from sqlglot import exp


def output_references(tree: exp.Expression, state: dict[str, Any]) -> exp.Expression:
    """Replace ``ORDER BY n`` (an alias of a projection) by the projection's expression, so that
    output aliases can be dropped and projections reordered later.

    >>> import sqlglot
    >>> tree = sqlglot.parse_one("SELECT t.a AS n FROM t AS t ORDER BY n DESC")
    >>> output_references(tree, {"qualified": True}).sql()
    'SELECT t.a AS n FROM t AS t ORDER BY t.a DESC'
    """
    if not state.get("qualified"):
        return tree
    for select in tree.find_all(exp.Select):
        order = select.args.get("order")
        if not order:
            continue
        aliases = {e.alias: e.this for e in select.expressions if isinstance(e, exp.Alias)}
        for ordered in order.expressions:
            key = ordered.this
            if isinstance(key, exp.Column) and not key.table and key.name in aliases:
                key.replace(aliases[key.name].copy())
            elif isinstance(key, exp.Literal) and key.is_int:
                position = int(key.name)
                if 1 <= position <= len(select.expressions):
                    projection = select.expressions[position - 1]
                    key.replace(projection.unalias().copy())
    return tree
