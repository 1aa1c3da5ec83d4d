"""What an IN / EXISTS subquery returns is a set: its DISTINCT, ORDER BY and EXISTS select list do not matter."""

from __future__ import annotations

from sqlglot import exp


def subquery_predicates(tree: exp.Expression) -> exp.Expression:
    """Remove what cannot change a subquery predicate's outcome: ``DISTINCT`` and an
    ``ORDER BY`` without ``LIMIT`` in ``x IN (SELECT ...)`` and ``EXISTS (SELECT ...)``; the
    select list of an ``EXISTS`` subquery without aggregates (it becomes ``SELECT 1``);
    ``DISTINCT`` inside ``MIN`` and ``MAX``.

    >>> import sqlglot
    >>> tree = sqlglot.parse_one("SELECT a FROM t WHERE a IN (SELECT DISTINCT b FROM u ORDER BY b)"
    ...                          " AND EXISTS (SELECT * FROM v) AND a > (SELECT MAX(DISTINCT c) FROM w)")
    >>> subquery_predicates(tree).sql()
    'SELECT a FROM t WHERE a IN (SELECT b FROM u) AND EXISTS(SELECT 1 FROM v) AND a > (SELECT MAX(c) FROM w)'
    """
    for node in list(tree.find_all(exp.In, exp.Exists)):
        query = node.args.get("query") if isinstance(node, exp.In) else node.this
        if isinstance(query, exp.Subquery):
            query = query.this
        if not isinstance(query, exp.Select):
            continue
        if not query.args.get("limit") and not query.args.get("offset"):
            query.set("order", None)
            query.set("distinct", None)
        if isinstance(node, exp.Exists) and not query.args.get("group") \
                and not query.args.get("having") and not any(
                e.find(exp.AggFunc) for e in query.expressions):
            query.set("expressions", [exp.Literal.number(1)])
    for agg in tree.find_all(exp.Max, exp.Min):
        if isinstance(agg.this, exp.Distinct) and len(agg.this.expressions) == 1:
            agg.set("this", agg.this.expressions[0])
    return tree
