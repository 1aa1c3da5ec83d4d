"""What the two queries read and compare, read off their qualified trees (:class:`Hints`,
:func:`hints`): the tables and columns they use, the literals each column is compared with
and the values around them (which pass the gold query's comparisons and which fail them by a
little), joins, sort keys under a LIMIT, aggregate thresholds (:class:`Aim`) and keys the
schema does not declare. The test databases of :mod:`evalharness_sql.generate` are aimed at
it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from sqlglot import exp

from evalharness_sql.engines import Schema
from evalharness_sql.lineage import column_tables

ColumnKey = tuple[str, str]
"""``(table, column)``, both lower-cased."""

DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")


@dataclass
class Hints:
    """What the two queries read and compare, to aim the test databases at it."""

    tables: set[str] = field(default_factory=set)
    columns: set[ColumnKey] = field(default_factory=set)
    literals: dict[ColumnKey, list[Any]] = field(default_factory=dict)
    """Values each column is compared with, exactly as written (a LIKE pattern: a string
    that matches it)."""
    near: dict[ColumnKey, list[Any]] = field(default_factory=dict)
    """Values just around those: boundaries, other letter cases, near misses."""
    passing: dict[ColumnKey, list[Any]] = field(default_factory=dict)
    """Values that pass the gold query's comparisons of the column (``x > 30``: 31)."""
    failing: dict[ColumnKey, list[Any]] = field(default_factory=dict)
    """Values that fail them by a little (``x > 30``: 30, 29)."""
    boundary: dict[ColumnKey, list[Any]] = field(default_factory=dict)
    """Values that pass the predicted query's comparisons of the column."""
    boundary_failing: dict[ColumnKey, list[Any]] = field(default_factory=dict)
    """Values that fail them by a little."""
    counts: list[int] = field(default_factory=list)
    """Numbers a COUNT is compared with (``HAVING count(*) > 10`` needs groups of 10 and 11)."""
    contested: set[ColumnKey] = field(default_factory=set)
    """Columns the two queries compare differently (where a difference is likeliest)."""
    sensitive: set[ColumnKey] = field(default_factory=set)
    """Columns the queries sort, group or aggregate by (where NULLs and ties matter most)."""
    free: list[Any] = field(default_factory=list)
    """Literals not tied to one column."""
    links: list[tuple[ColumnKey, ColumnKey]] = field(default_factory=list)
    """Columns compared with each other (joins), besides declared foreign keys."""
    ordered: dict[ColumnKey, bool] = field(default_factory=dict)
    """Columns sorted under a LIMIT, and whether descending (where ties at the cut matter)."""
    aggregates: list[Aim] = field(default_factory=list)
    """Aggregates the queries compare with a number (``HAVING count(*) > 4``)."""
    grouped: set[ColumnKey] = field(default_factory=set)
    """Columns the queries group by, select DISTINCT, join on or sort by under a LIMIT, that
    the schema does not declare unique: where a key (or an order without ties) would be
    assumed."""


@dataclass(frozen=True)
class Aim:
    """An aggregate compared with a number: ``function(column) op value`` (``column`` is
    None for ``count(*)``); the test databases build groups on, below and above ``value``."""

    function: str
    column: ColumnKey | None
    distinct: bool
    value: int | float


def hints(trees: list[exp.Expression | None], schema: Schema) -> Hints:
    """Collect the tables, columns, literals and joins of (qualified) query trees; the first
    tree is the gold query, whose comparisons decide which values pass.

    >>> import sqlglot
    >>> from evalharness_sql.engines import SQLiteEngine
    >>> schema = SQLiteEngine.from_ddl("CREATE TABLE t (id INT, age INT, name TEXT)").schema()
    >>> h = hints([sqlglot.parse_one("SELECT t.name FROM t AS t WHERE t.age > 30 AND "
    ...                              "t.name LIKE 'An%'")], schema)
    >>> sorted(h.tables), h.literals[("t", "age")], h.passing[("t", "age")], h.failing[("t", "age")]
    (['t'], [30], [31, 30.5], [30, 29, 29.5])
    >>> h.passing[("t", "name")], h.failing[("t", "name")]
    (['An', 'an', 'AN', 'Anx'], ['n'])
    """
    out = Hints()
    comparisons: list[dict[ColumnKey, list[str]]] = []
    for position, tree in enumerate(trees):
        if tree is None:
            continue
        for table in tree.find_all(exp.Table):
            t = schema.table(table.name)
            if t is not None:
                out.tables.add(t.name.lower())
                if t.is_view:
                    out.tables.update(k for k, v in schema.tables.items() if not v.is_view)
        origin = column_tables(tree)

        def key(node: exp.Expression, origin: dict[int, str] = origin) -> ColumnKey | None:
            if isinstance(node, exp.Column) and id(node) in origin:
                return (origin[id(node)].lower(), node.name.lower())
            return None

        for column in tree.find_all(exp.Column):
            k = key(column)
            if k is not None:
                out.columns.add(k)
        before = {k: list(v) for k, v in out.literals.items()}
        for node in tree.find_all(exp.Predicate, exp.Binary):
            _predicate_hints(node, key, out, gold=position == 0)
        compared = {k: sorted(map(repr, v[len(before.get(k, [])):]))
                    for k, v in out.literals.items()}
        comparisons.append({k: v for k, v in compared.items() if v})
        for node in tree.find_all(exp.Ordered, exp.AggFunc, exp.Group):
            for column in node.find_all(exp.Column):
                k = key(column)
                if k is not None:
                    out.sensitive.add(k)
        for select in tree.find_all(exp.Select):
            order_by = select.args.get("order")
            if select.args.get("limit") is not None and order_by is not None:
                for ordered in order_by.expressions:
                    for column in ordered.find_all(exp.Column):
                        k = key(column)
                        if k is not None:
                            out.grouped.add(k)
                            out.ordered.setdefault(k, bool(ordered.args.get("desc")))
        for node in tree.find_all(exp.Group, exp.Select):
            if isinstance(node, exp.Select):
                if not node.args.get("distinct"):
                    continue
                items: list[exp.Expression] = list(node.expressions)
            else:
                items = list(node.expressions)
            for item in items:
                k = key(item.unalias())
                if k is not None:
                    out.grouped.add(k)
        for literal in tree.find_all(exp.Literal):
            value = literal_value(literal)
            if value is not None and value not in out.free:
                out.free.append(value)
    for table in (out.literals, out.passing, out.failing, out.boundary, out.boundary_failing):
        for k, values in table.items():
            table[k] = unique(values)
    for k, values in out.near.items():
        out.near[k] = [v for v in unique(values) if v not in out.literals.get(k, [])]
    out.free = unique(v for value in out.free for v in neighbours(value))
    out.counts = sorted(set(out.counts))
    out.aggregates = list(dict.fromkeys(out.aggregates))
    for a, b in out.links:
        out.grouped.update((a, b))
    out.grouped = {k for k in out.grouped if not _declared_unique(schema, k)}
    if len(comparisons) == 2:
        gold, pred = comparisons
        out.contested = {k for k in set(gold) | set(pred) if gold.get(k) != pred.get(k)}
    return out


_FLIP = {exp.GT: exp.LT, exp.LT: exp.GT, exp.GTE: exp.LTE, exp.LTE: exp.GTE}


def _predicate_hints(node: exp.Expression, key: Any, out: Hints, *, gold: bool) -> None:
    negated = _negated(node)
    if isinstance(node, exp.In):
        column = key(node.this)
        query = node.args.get("query")
        if column is not None and query is not None:
            inner = query.this if isinstance(query, exp.Subquery) else query
            if isinstance(inner, exp.Select) and inner.expressions:
                other = key(inner.expressions[0].unalias())
                if other is not None:
                    out.links.append((column, other))
        elif column is not None:
            values = [v for v in (literal_value(e) for e in node.expressions) if v is not None]
            for value in values:
                _record(out, column, value, exp.EQ, negated, gold, others=values)
        return
    if isinstance(node, exp.Between):
        column = key(node.this)
        low, high = literal_value(node.args.get("low")), literal_value(node.args.get("high"))
        if column is not None:
            if low is not None:
                _record(out, column, low, exp.GTE, negated, gold, upper=high)
            if high is not None:
                _record(out, column, high, exp.LTE, negated, gold, lower=low)
        return
    if not isinstance(node, exp.Binary) or isinstance(node, exp.Connector):
        return
    left, right = node.this, node.expression
    lk, rk = key(left), key(right)
    if lk is not None and rk is not None:
        if isinstance(node, exp.EQ | exp.NullSafeEQ):
            out.links.append((lk, rk))
        return
    for side, other, flipped in ((left, right, False), (right, left, True)):
        value = literal_value(other)
        if value is None:
            continue
        if isinstance(value, int) and side.find(exp.Count):
            out.counts += [value - 1, value, value + 1]
        aim = _aim(side, value, key)
        if aim is not None:
            out.aggregates.append(aim)
        k = key(side)
        op = type(node)
        if flipped:
            op = _FLIP.get(op, op)
        if k is None and not (op in (exp.Like, exp.ILike, exp.Glob) and
                              isinstance(side, exp.Cast) and key(side.this) is not None):
            op = exp.Anonymous  # inside a function: the comparison's meaning is unknown
        targets = [k] if k is not None else [key(c) for c in side.find_all(exp.Column)]
        for target in targets:
            if target is not None:
                _record(out, target, value, op, negated, gold)


_AGGREGATES = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min",
               exp.Max: "max"}


def _aim(side: exp.Expression, value: Any, key: Any) -> Aim | None:
    """The :class:`Aim` of ``side op value`` when ``side`` is an aggregate of one column (or
    ``count(*)``) and ``value`` a number.

    >>> import sqlglot
    >>> tree = sqlglot.parse_one("SELECT a FROM t GROUP BY a HAVING count(DISTINCT t.b) > 5")
    >>> _aim(tree.args["having"].this.this, 5, lambda c: ("t", c.name))
    Aim(function='count', column=('t', 'b'), distinct=True, value=5)
    """
    while isinstance(side, exp.Paren):
        side = side.this
    function = _AGGREGATES.get(type(side))
    if function is None or not isinstance(value, int | float) or isinstance(value, bool):
        return None
    inner = side.this
    distinct = isinstance(inner, exp.Distinct)
    if distinct:
        if len(inner.expressions) != 1:
            return None
        inner = inner.expressions[0]
    if isinstance(inner, exp.Star) or (function == "count" and isinstance(inner, exp.Literal)):
        column = None
    else:
        column = key(inner)
        if column is None:
            return None
    if column is None and function != "count":
        return None
    return Aim(function, column, distinct, value)


def _declared_unique(schema: Schema, column: ColumnKey) -> bool:
    """Whether a primary key or UNIQUE constraint of its own makes the column unique."""
    table = schema.tables.get(column[0])
    if table is None:
        return False
    keys = [table.primary_key, *table.unique]
    return any(len(k) == 1 and k[0].lower() == column[1] for k in keys)


def _negated(node: exp.Expression) -> bool:
    flips = 0
    parent = node.parent
    while isinstance(parent, exp.Not | exp.Paren):
        flips += isinstance(parent, exp.Not)
        parent = parent.parent
    return flips % 2 == 1


def _record(out: Hints, column: ColumnKey, value: Any, op: type, negated: bool, gold: bool,
            *, others: list[Any] | None = None, lower: Any = None, upper: Any = None) -> None:
    """Note a comparison ``column op value``: its literal, the values around it, and which of
    those pass or fail it."""
    if op in (exp.Like, exp.ILike, exp.Glob) and isinstance(value, str):
        candidates = like_matches(value) + _like_numbers(value)
        passes = [c for c in candidates if _like(str(c), value, glob=op is exp.Glob)]
        fails = [c for c in candidates if c not in passes]
        exact = passes[0] if passes else value
    else:
        candidates = neighbours(value)
        exact = value
        passes, fails = [], []
        for c in candidates:
            verdict = _compare(c, op, value, others)
            if verdict is not None and lower is not None:
                verdict = verdict and _compare(c, exp.GTE, lower, None) is not False
            if verdict is not None and upper is not None:
                verdict = verdict and _compare(c, exp.LTE, upper, None) is not False
            if verdict is None:
                verdict = c == value
            (passes if verdict else fails).append(c)
    if negated:
        passes, fails = fails, passes
    out.literals.setdefault(column, []).append(exact)
    out.near.setdefault(column, []).extend(c for c in candidates if c != exact)
    if gold:
        out.passing.setdefault(column, []).extend(passes)
        out.failing.setdefault(column, []).extend(fails)
    else:
        numbers = [c for c in passes if not isinstance(c, str)]  # (a LIKE's text comes first)
        out.boundary.setdefault(column, []).extend(passes[:2] + numbers[:2])
        out.boundary_failing.setdefault(column, []).extend(fails[:2])


def _compare(candidate: Any, op: type, value: Any, others: list[Any] | None) -> bool | None:
    """How ``candidate op value`` comes out, for values of one type; None when unknown."""
    if op is exp.EQ:
        return candidate in (others or [value])
    if op is exp.NEQ:
        return candidate != value
    numbers = (int, float)
    same = (isinstance(candidate, numbers) and isinstance(value, numbers)
            and not isinstance(candidate, bool)) or (
        isinstance(candidate, str) and isinstance(value, str))
    if not same:
        return None
    if op is exp.GT:
        return candidate > value
    if op is exp.GTE:
        return candidate >= value
    if op is exp.LT:
        return candidate < value
    if op is exp.LTE:
        return candidate <= value
    return None


def _like(text: str, pattern: str, *, glob: bool = False) -> bool:
    """SQLite's LIKE (ASCII case-insensitive, ``%`` and ``_``) or GLOB (``*`` and ``?``)."""
    out = []
    for ch in pattern:
        if (ch == "%" and not glob) or (ch == "*" and glob):
            out.append(".*")
        elif (ch == "_" and not glob) or (ch == "?" and glob):
            out.append(".")
        else:
            out.append(re.escape(ch))
    flags = re.DOTALL | (0 if glob else re.IGNORECASE)
    return re.fullmatch("".join(out), text, flags) is not None


def literal_value(node: exp.Expression | None) -> Any:
    """The Python value of a literal (or a negated number), else ``None``.

    >>> import sqlglot
    >>> [literal_value(sqlglot.parse_one(s)) for s in ("'a'", "3", "-2.5", "x")]
    ['a', 3, -2.5, None]
    """
    if isinstance(node, exp.Neg):
        inner = literal_value(node.this)
        return -inner if isinstance(inner, int | float) else None
    if not isinstance(node, exp.Literal):
        return None
    if node.is_string:
        return node.name
    try:
        return int(node.name)
    except ValueError:
        try:
            return float(node.name)
        except ValueError:
            return None


def neighbours(value: Any) -> list[Any]:
    """The value and values just around it: what a boundary or a case difference needs.

    >>> neighbours(30), neighbours(2.5)
    ([30, 29, 31, 29.5, 30.5], [2.5, 1.5, 3.5, 2.51, 2.495, 2.505])
    >>> neighbours("France")
    ['France', 'france', 'FRANCE', 'France ', 'Francex']
    >>> neighbours("2026-08-01")[:4]
    ['2026-08-01', '2026-07-31', '2026-08-02', '2026-08-01 12:00:00']
    """
    if isinstance(value, bool):
        return [int(value)]
    if isinstance(value, int):  # (the halves are for REAL columns; others drop them)
        return [value, value - 1, value + 1, value - 0.5, value + 0.5]
    if isinstance(value, float):
        return [value, value - 1, value + 1, round(value + 0.01, 6), round(value - 0.005, 6),
                round(value + 0.005, 6)]
    if not isinstance(value, str):
        return [value]
    out = [value]
    m = DATE.match(value)
    if m:
        try:
            d = date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
            out += [(d - timedelta(days=1)).isoformat(), (d + timedelta(days=1)).isoformat(),
                    d.isoformat() + " 12:00:00"]
        except ValueError:
            pass
    elif re.fullmatch(r"-?\d+", value):
        out += [str(int(value) - 1), str(int(value) + 1)]
    out += [value.lower(), value.upper(), value + " ", value + "x"]
    return unique(out)


def _like_numbers(pattern: str) -> list[int | float]:
    """Numbers whose text a pattern with a leading number is about: ``CAST(year AS TEXT)
    LIKE '201%'`` holds for 201 and 20100, not only for 2010–2019.

    >>> _like_numbers("201%"), _like_numbers("%a%")
    ([201, 2010, 20100, 201000, 2010000, 20.1, 200], [])
    """
    m = re.match(r"(\d+)", pattern)
    if not m:
        return []
    n = int(m.group(1))
    digits = m.group(1)
    out: list[int | float] = [n * 10 ** k for k in range(5)]
    if len(digits) > 1:
        out.append(float(digits[:-1] + "." + digits[-1]))
    out.append(n - 1)
    return out


def like_matches(pattern: str) -> list[str]:
    """Strings that match a LIKE pattern, and near misses.

    >>> like_matches("%denim%")
    ['denim', 'DENIM', 'xdenimx', 'Xdenimx', 'enim']
    """
    core = pattern.replace("%", "").replace("_", "")
    filled = pattern.replace("%", "").replace("_", "a")
    wide = pattern.replace("%", "x").replace("_", "a")
    out = [filled, filled.lower(), filled.upper(), wide, wide[:1].upper() + wide[1:],
           core[1:] if len(core) > 1 else core + "y"]
    return unique(out)


def unique(values: Any) -> list[Any]:
    """The values in order, each once (``1``, ``1.0`` and ``True`` are different values)."""
    seen: set[Any] = set()
    return [v for v in values if not ((k := (type(v), v)) in seen or seen.add(k))]
