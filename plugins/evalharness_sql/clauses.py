"""Clause-level comparison of two queries: which parts differ, and an F1 score per clause.

For diagnosis only (equivalent queries can be written with different clauses): the clauses
are ``select``, ``from`` (tables, join kinds and join conditions), ``where``, ``group_by``,
``having``, ``order_by`` and ``limit``; each clause is a multiset of items (projections,
conjuncts, keys) compared by their normalised SQL.
"""

from __future__ import annotations

from collections import Counter

from sqlglot import exp

CLAUSES = ("select", "from", "where", "group_by", "having", "order_by", "limit")


def clause_items(tree: exp.Expression, dialect: str = "sqlite") -> dict[str, Counter]:
    """Each clause's items.

    >>> import sqlglot
    >>> items = clause_items(sqlglot.parse_one(
    ...     "SELECT a.x, COUNT(*) FROM a JOIN b ON a.id = b.id WHERE a.y > 1 GROUP BY a.x"))
    >>> {k: sorted(v) for k, v in items.items() if v}
    {'select': ['COUNT(*)', 'a.x'], 'from': ['a', 'a.id = b.id', 'b'], 'where': ['a.y > 1'], 'group_by': ['a.x']}
    """
    items: dict[str, Counter] = {c: Counter() for c in CLAUSES}
    _collect(tree, items, "", dialect)
    return items


def _sql(node: exp.Expression, dialect: str) -> str:
    return node.sql(dialect=dialect, comments=False)


def _collect(tree: exp.Expression, items: dict[str, Counter], prefix: str, dialect: str) -> None:
    if isinstance(tree, exp.Subquery) and not tree.alias:
        _collect(tree.this, items, prefix, dialect)
        return
    if isinstance(tree, exp.SetOperation):
        kind = type(tree).__name__.upper() + (" ALL" if not tree.args.get("distinct") else "")
        items["select"][prefix + kind] += 1
        _collect(tree.left, items, prefix + "1:", dialect)
        _collect(tree.right, items, prefix + "2:", dialect)
        _order_limit(tree, items, prefix, dialect)
        return
    if not isinstance(tree, exp.Select):
        items["select"][prefix + _sql(tree, dialect)] += 1
        return
    if tree.args.get("distinct"):
        items["select"][prefix + "DISTINCT"] += 1
    for e in tree.expressions:
        items["select"][prefix + _sql(e.unalias(), dialect)] += 1
    source = tree.args.get("from_") or tree.args.get("from")
    if source is not None:
        items["from"][prefix + _sql(source.this, dialect)] += 1
    for join in tree.args.get("joins") or ():
        side = f"{join.side} JOIN " if join.side else ""
        items["from"][prefix + side + _sql(join.this, dialect)] += 1
        on = join.args.get("on")
        for conjunct in _conjuncts(on):
            items["from"][prefix + side + _sql(conjunct, dialect)] += 1
        if join.args.get("using"):
            items["from"][prefix + "USING " + ", ".join(_sql(u, dialect)
                                                        for u in join.args["using"])] += 1
    where = tree.args.get("where")
    for conjunct in _conjuncts(where.this if where else None):
        clause = "from" if _is_join_condition(conjunct) else "where"
        items[clause][prefix + _sql(conjunct, dialect)] += 1
    group = tree.args.get("group")
    for e in group.expressions if group else ():
        items["group_by"][prefix + _sql(e, dialect)] += 1
    having = tree.args.get("having")
    for conjunct in _conjuncts(having.this if having else None):
        items["having"][prefix + _sql(conjunct, dialect)] += 1
    _order_limit(tree, items, prefix, dialect)


def _order_limit(tree: exp.Expression, items: dict[str, Counter], prefix: str,
                 dialect: str) -> None:
    order = tree.args.get("order")
    for o in order.expressions if order else ():
        items["order_by"][prefix + _sql(o, dialect)] += 1
    for key in ("limit", "offset"):
        if tree.args.get(key) is not None:
            items["limit"][prefix + _sql(tree.args[key], dialect).strip()] += 1


def _conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    if node is None:
        return []
    node = node.unnest()
    if isinstance(node, exp.And):
        return [c.unnest() for c in node.flatten()]
    return [node]


def _is_join_condition(node: exp.Expression) -> bool:
    return (isinstance(node, exp.EQ) and isinstance(node.this, exp.Column)
            and isinstance(node.expression, exp.Column)
            and node.this.table != node.expression.table and bool(node.this.table))


def f1(gold: Counter, predicted: Counter) -> float | None:
    """F1 of two multisets; ``None`` when both are empty (the clause is in neither query).

    >>> f1(Counter(["a", "b"]), Counter(["a", "c"])), f1(Counter(), Counter())
    (0.5, None)
    """
    if not gold and not predicted:
        return None
    common = sum((gold & predicted).values())
    return 2 * common / (sum(gold.values()) + sum(predicted.values()))


def clause_f1(gold: exp.Expression, predicted: exp.Expression, dialect: str = "sqlite"
              ) -> tuple[float, dict[str, float]]:
    """The mean F1 over the clauses present in either query, and the F1 of each.

    >>> import sqlglot
    >>> mean, per = clause_f1(sqlglot.parse_one("SELECT a FROM t WHERE b > 1"),
    ...                       sqlglot.parse_one("SELECT a FROM t WHERE b >= 1"))
    >>> round(mean, 3), per
    (0.667, {'select': 1.0, 'from': 1.0, 'where': 0.0})
    """
    return items_f1(clause_items(gold, dialect), clause_items(predicted, dialect))


def items_f1(g: dict[str, Counter], p: dict[str, Counter]) -> tuple[float, dict[str, float]]:
    """:func:`clause_f1` from both queries' :func:`clause_items`."""
    per = {c: score for c in CLAUSES if (score := f1(g[c], p[c])) is not None}
    return (sum(per.values()) / len(per) if per else 1.0), per


def differing_clauses(gold: exp.Expression, predicted: exp.Expression,
                      dialect: str = "sqlite") -> list[str]:
    """The clauses whose items differ, in clause order."""
    g, p = clause_items(gold, dialect), clause_items(predicted, dialect)
    return [c for c in CLAUSES if g[c] != p[c]]
