"""Inner joins commute, and their ON conditions are filters: one canonical shape for them."""

from __future__ import annotations

from typing import Any

from sqlglot import exp


def inner_joins(tree: exp.Expression, state: dict[str, Any]) -> exp.Expression:
    """In a SELECT whose joins are all inner (or comma) joins with ``ON`` conditions, move the
    conditions into ``WHERE`` and list the tables in a canonical order (by table name, then
    alias). Outer, ``NATURAL`` and ``USING`` joins are left alone.

    >>> import sqlglot
    >>> tree = sqlglot.parse_one("SELECT s.name FROM singer AS s JOIN concert AS c ON "
    ...                          "c.sid = s.id WHERE c.year = '2014'")
    >>> inner_joins(tree, {"qualified": True}).sql()
    "SELECT s.name FROM concert AS c CROSS JOIN singer AS s WHERE c.year = '2014' AND c.sid = s.id"
    """
    if not state.get("qualified"):
        return tree
    for select in list(tree.find_all(exp.Select)):
        joins = select.args.get("joins") or []
        source = select.args.get("from_") or select.args.get("from")
        if not joins or source is None:
            continue
        if any(j.side or j.args.get("using") or j.args.get("method")
               or (j.kind or "").upper() not in ("", "INNER", "CROSS")
               or not isinstance(j.this, exp.Table) for j in joins):
            continue
        if not isinstance(source.this, exp.Table):
            continue
        conditions = [j.args["on"] for j in joins if j.args.get("on")]
        tables = [source.this, *(j.this for j in joins)]
        tables.sort(key=lambda t: (t.name, t.alias_or_name))
        source.set("this", tables[0].copy())
        select.set("joins", [exp.Join(this=t.copy(), kind="CROSS") for t in tables[1:]])
        if conditions:
            where = select.args.get("where")
            parts = ([where.this] if where else []) + [c.copy() for c in conditions]
            select.set("where", exp.Where(this=exp.and_(*parts, copy=False)))
    return tree
