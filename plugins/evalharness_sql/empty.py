"""Queries that can never return a row, whatever the database: two such queries are
equivalent, and no test database could show it (both results are always empty).

What is recognised, on a normal form (inner joins' ``ON`` conditions are in ``WHERE`` there):
a ``WHERE`` conjunct that is false (``WHERE FALSE``), a column both ``IS NULL`` and compared by
a conjunct that no NULL passes (``a.mgr IS NULL AND a.mgr = b.mgr``), two comparisons of the
same two columns that no ordering passes (``a.x < a.y AND a.x > a.y``, with the same column on
the left, so one collation applies), an equality or ``IN`` list that no value of the column's
``CHECK (column IN (...))`` list passes (given the schema; a value that might match under
another affinity or a case-insensitive collation counts as passing), ``LIMIT 0``, and set
operations of such queries. A query with an aggregate and no ``GROUP BY`` is never empty: it
returns one row even from no rows.
"""

from __future__ import annotations

from sqlglot import exp

from evalharness_sql.engines import Schema

_NULL_REJECTING = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike,
                   exp.Glob, exp.In, exp.Between)


def never_returns_rows(tree: exp.Expression, schema: Schema | None = None) -> str | None:
    """Why ``tree`` returns no row on any database, or None when it may return one.

    >>> import sqlglot
    >>> never_returns_rows(sqlglot.parse_one(
    ...     "SELECT a.name FROM emp AS a, emp AS b WHERE a.mgr = b.mgr AND a.mgr IS NULL"))
    'a.mgr IS NULL, and a.mgr = b.mgr is never true for NULL'
    >>> never_returns_rows(sqlglot.parse_one(
    ...     "SELECT count(*) FROM emp AS a WHERE a.mgr = 1 AND a.mgr IS NULL")) is None
    True
    >>> never_returns_rows(sqlglot.parse_one("SELECT x FROM t LIMIT 0"))
    'LIMIT 0'
    >>> never_returns_rows(sqlglot.parse_one("SELECT x FROM t WHERE t.a < t.b AND t.a > t.b"))
    'no row passes both comparisons of t.a with t.b'
    >>> never_returns_rows(sqlglot.parse_one("SELECT x FROM t WHERE t.a <= t.b AND t.a >= t.b"))
    >>> from evalharness_sql.engines import SQLiteEngine
    >>> schema = SQLiteEngine.from_ddl(
    ...     "CREATE TABLE d (name TEXT, grade TEXT CHECK (grade IN ('junior', 'senior')))").schema()
    >>> never_returns_rows(sqlglot.parse_one("SELECT d.name FROM d AS d WHERE d.grade = 'intern'"),
    ...                    schema)
    "d.grade = 'intern' can never hold: the CHECK constraint of d.grade allows only 'junior', 'senior'"
    >>> never_returns_rows(sqlglot.parse_one("SELECT d.name FROM d AS d WHERE d.grade = 'Junior'"),
    ...                    schema) is None
    True
    """
    while isinstance(tree, exp.Subquery | exp.Paren):
        tree = tree.this
    if isinstance(tree, exp.Union):
        left = never_returns_rows(tree.left, schema)
        right = never_returns_rows(tree.right, schema)
        return f"{left}; {right}" if left and right else None
    if isinstance(tree, exp.Intersect):
        return never_returns_rows(tree.left, schema) or never_returns_rows(tree.right, schema)
    if isinstance(tree, exp.Except):
        return never_returns_rows(tree.left, schema)
    if not isinstance(tree, exp.Select):
        return None
    limit = tree.args.get("limit")
    if limit is not None and isinstance(limit.expression, exp.Literal) and \
            limit.expression.name == "0":
        return "LIMIT 0"
    if not tree.args.get("group") and any(_aggregates(e) for e in tree.expressions):
        return None  # one row even from nothing
    where = tree.args.get("where")
    if where is None:
        return None
    conjuncts = list(where.this.flatten()) if isinstance(where.this, exp.And) else [where.this]
    null: dict[str, exp.Expression] = {}
    for c in conjuncts:
        if isinstance(c, exp.Boolean) and not c.this:
            return "its WHERE clause is FALSE"
        if isinstance(c, exp.Is) and isinstance(c.expression, exp.Null) and \
                isinstance(c.this, exp.Column):
            null[c.this.sql()] = c
    if schema is not None:
        why = _outside_check_list(tree, conjuncts, schema)
        if why:
            return why
    relations: dict[tuple[str, str], frozenset[str]] = {}
    for c in conjuncts:
        outcomes = _OUTCOMES.get(type(c))
        if outcomes is None or not isinstance(c.this, exp.Column) or \
                not isinstance(c.expression, exp.Column):
            continue
        pair = (c.this.sql(), c.expression.sql())  # one left operand: one collation
        left = relations.get(pair, frozenset(("lt", "eq", "gt"))) & outcomes
        if not left:
            return f"no row passes both comparisons of {pair[0]} with {pair[1]}"
        relations[pair] = left
    for c in conjuncts:
        if not isinstance(c, _NULL_REJECTING):
            continue
        operands = [c.this] + ([] if isinstance(c, exp.In | exp.Between) else [c.expression])
        for operand in operands:
            if isinstance(operand, exp.Column) and operand.sql() in null:
                return (f"{operand.sql()} IS NULL, and {c.sql()} is never true for NULL")
    return None


def _outside_check_list(select: exp.Select, conjuncts: list[exp.Expression],
                        schema: Schema) -> str | None:
    """A conjunct ``column = value`` or ``column IN (values)`` that no value of the column's
    ``CHECK (column IN (...))`` list passes (NULL passes neither)."""
    tables = {}
    source = select.args.get("from_") or select.args.get("from")  # (the key's sqlglot names)
    for table in [source, *(select.args.get("joins") or [])]:
        node = table.this if table is not None else None
        if isinstance(node, exp.Table):
            tables[node.alias_or_name.lower()] = node.name.lower()
    for c in conjuncts:
        if isinstance(c, exp.EQ):
            column, values = (c.this, [c.expression]) if isinstance(c.this, exp.Column) \
                else (c.expression, [c.this])
        elif isinstance(c, exp.In) and not c.args.get("query"):
            column, values = c.this, list(c.expressions)
        else:
            continue
        if not isinstance(column, exp.Column) or column.table.lower() not in tables or \
                not all(isinstance(v, exp.Literal) for v in values):
            continue
        declared = schema.column(tables[column.table.lower()], column.name)
        if declared is None or declared.allowed is None:
            continue
        if not any(_may_equal(v, a) for v in values for a in declared.allowed):
            return (f"{c.sql()} can never hold: the CHECK constraint of {column.sql()} "
                    f"allows only {', '.join(map(repr, declared.allowed))}")
    return None


def _may_equal(literal: exp.Literal, allowed: object) -> bool:
    """Whether a literal might equal an allowed value under any affinity or collation
    (``'2'`` and ``2``, ``'Junior'`` and ``'junior'`` count as possibly equal)."""
    forms = {literal.name.lower()}
    try:
        forms.add(str(float(literal.name)))
    except ValueError:
        pass
    allowed_forms = {str(allowed).lower()}
    if isinstance(allowed, int | float) and not isinstance(allowed, bool):
        allowed_forms.add(str(float(allowed)))
    return bool(forms & allowed_forms)


_OUTCOMES = {exp.LT: frozenset(("lt",)), exp.LTE: frozenset(("lt", "eq")),
             exp.EQ: frozenset(("eq",)), exp.GTE: frozenset(("eq", "gt")),
             exp.GT: frozenset(("gt",)), exp.NEQ: frozenset(("lt", "gt"))}
"""Which orderings of its two operands each comparison lets through."""


def _aggregates(node: exp.Expression) -> bool:
    """Whether a select item aggregates (outside any subquery)."""
    for found in node.find_all(exp.AggFunc):
        current = found
        while current is not node and not isinstance(current, exp.Select):
            current = current.parent
        if current is node:
            return True
    return False
