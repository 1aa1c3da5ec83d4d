"""``SELECT a, b ... GROUP BY a, b`` without aggregates is ``SELECT DISTINCT a, b``."""

from __future__ import annotations

from sqlglot import exp


def distinct_as_group_by(tree: exp.Expression) -> exp.Expression:
    """Write a grouping that only removes duplicates (no aggregate, no ``HAVING``, the
    grouping keys are exactly the projections) as ``SELECT DISTINCT``.

    >>> import sqlglot
    >>> distinct_as_group_by(sqlglot.parse_one("SELECT t.a FROM t GROUP BY t.a")).sql()
    'SELECT DISTINCT t.a FROM t'
    """
    for select in list(tree.find_all(exp.Select)):
        group = select.args.get("group")
        if not group or select.args.get("having") or select.args.get("distinct"):
            continue
        if any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets", "totals", "all")):
            continue
        if any(e.find(exp.AggFunc) for e in select.expressions) or (
                select.args.get("order") and select.args["order"].find(exp.AggFunc)):
            continue
        projected = {e.unalias().sql() for e in select.expressions}
        keys = {e.sql() for e in group.expressions}
        if projected != keys or len(projected) != len(select.expressions):
            continue
        if select.args.get("order") and any(
                o.this.sql() not in keys for o in select.args["order"].expressions):
            continue
        select.set("group", None)
        select.set("distinct", exp.Distinct())
    return tree
