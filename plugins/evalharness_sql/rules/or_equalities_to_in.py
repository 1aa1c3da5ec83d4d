"""``x = 1 OR x = 2`` is ``x IN (1, 2)``."""

from __future__ import annotations

from sqlglot import exp


def or_equalities_to_in(tree: exp.Expression) -> exp.Expression:
    """Gather the equalities of one expression with constants in a disjunction into an IN
    list (equal in three-valued logic: ``x IN (a, b)`` is defined as ``x = a OR x = b``).

    >>> import sqlglot
    >>> tree = sqlglot.parse_one("SELECT a FROM t WHERE t.c = 'x' OR t.c = 'y' OR t.d = 1")
    >>> or_equalities_to_in(tree).sql()
    "SELECT a FROM t WHERE t.c IN ('x', 'y') OR t.d = 1"
    """
    for node in list(tree.find_all(exp.Or)):
        if isinstance(node.parent, exp.Or) or node.root() is not tree.root():
            continue  # handle each disjunction once, from its top
        operands = list(node.flatten())
        groups: dict[str, list[exp.Expression]] = {}
        rest: list[exp.Expression] = []
        for op in operands:
            inner = op.unnest()
            if isinstance(inner, exp.EQ) and _constant(inner.expression):
                groups.setdefault(inner.this.sql(), []).append(inner)
            elif isinstance(inner, exp.In) and not inner.args.get("query") and \
                    all(_constant(e) for e in inner.expressions):
                groups.setdefault(inner.this.sql(), []).append(inner)
            else:
                rest.append(op)
        if not any(len(g) > 1 for g in groups.values()):
            continue
        new: list[exp.Expression] = []
        for members in groups.values():
            if len(members) == 1:
                new.append(members[0])
                continue
            values: list[exp.Expression] = []
            for m in members:
                values.extend(m.expressions if isinstance(m, exp.In) else [m.expression])
            new.append(exp.In(this=members[0].this.copy(), expressions=[v.copy() for v in values]))
        node.replace(exp.or_(*new, *rest, copy=False))
    return tree


def _constant(node: exp.Expression) -> bool:
    return isinstance(node, exp.Literal | exp.Boolean) or (
        isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal))
