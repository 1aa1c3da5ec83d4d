"""The test-suite databases: perturbed copies of the scenario's data and databases generated
from the schema, shaped by what the two queries compare.

Equal results on one database can be luck: the difference between ``>`` and ``>=`` needs a
row on the boundary, ``LEFT`` versus ``INNER JOIN`` a parent without children, ``COUNT(x)``
versus ``COUNT(*)`` a NULL, ``ORDER BY ... LIMIT 1`` versus ``= (SELECT MAX ...)`` a tie. The
recipes here produce such rows on purpose:

* **generated** databases are filled from the schema alone (so they work on an empty or
  absent database): a few rows per table, primary keys unique, foreign keys pointing at
  existing parents (or NULL), values drawn from small pools — so that ties and duplicates
  are common — made of the literals the queries compare each column with and their
  neighbours (``30`` gives 29, 30, 31; ``'France'`` gives ``'france'``, ``'France '``; a
  ``LIKE`` pattern gives strings that do and do not match), values of the real data, and
  type defaults; nullable columns sometimes NULL.
* **perturbed** copies start from a sample of the real rows (parents of the sampled children
  kept, so foreign keys hold) and then add NULLs, duplicate rows, ties, shifted numbers or
  the queries' boundary values.

Only the tables the queries read are filled. Every recipe is deterministic: its seed comes
from the pair, the stage's seed and the recipe's number.
"""

from __future__ import annotations

import math
import random
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from sqlglot import exp

from evalharness_sql.compare import jsonable
from evalharness_sql.contract import coerce, conform, key_value
from evalharness_sql.engines import Column, Engine, Schema, Table
from evalharness_sql.lineage import column_tables

ColumnKey = tuple[str, str]
"""``(table, column)``, both lower-cased."""

_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")


# --------------------------------------------------------------------------------------------
# What the queries tell us
# --------------------------------------------------------------------------------------------


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
            table[k] = _unique(values)
    for k, values in out.near.items():
        out.near[k] = [v for v in _unique(values) if v not in out.literals.get(k, [])]
    out.free = _unique(v for value in out.free for v in neighbours(value))
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
    m = _DATE.match(value)
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
    return _unique(out)


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
    return _unique(out)


def _unique(values: Any) -> list[Any]:
    """The values in order, each once (``1``, ``1.0`` and ``True`` are different values)."""
    seen: set[Any] = set()
    return [v for v in values if not ((k := (type(v), v)) in seen or seen.add(k))]


# --------------------------------------------------------------------------------------------
# Recipes
# --------------------------------------------------------------------------------------------


@dataclass
class Recipe:
    """One test database: how it was made, and its rows."""

    number: int
    kind: str
    seed: int
    steps: list[str]
    data: dict[str, list[tuple[Any, ...]]]

    def describe(self) -> str:
        return f"test database {self.number} ({self.kind}: {'; '.join(self.steps[:4])})"

    def to_dict(self, schema: Schema, max_rows: int = 30) -> dict[str, Any]:
        """The recipe as a counterexample: seed, steps, and the rows of the tables."""
        tables = {}
        for key, rows in self.data.items():
            t = schema.tables[key]
            tables[t.name] = {"columns": [c.name for c in t.columns],
                              "rows": [jsonable(r) for r in rows[:max_rows]],
                              **({"rows_total": len(rows)} if len(rows) > max_rows else {})}
        return {"recipe": self.kind, "number": self.number, "seed": self.seed,
                "steps": self.steps, "tables": tables}


PLAN = ("generated:pass", "generated:fail", "perturbed:ties,duplicates",
        "generated:near,nulls", "generated:pass,sparse", "generated:fail,nulls",
        "perturbed:nulls", "generated:pass,wide,skew", "generated:near",
        "perturbed:literals,shift", "generated:fail", "generated:pass,nulls",
        "generated:random,skew", "perturbed:subset,duplicates", "generated:fail,wide",
        "generated:near,sparse", "generated:pass,skew", "perturbed:nulls,ties",
        "generated:fail,nulls,skew", "generated:random,wide,skew")
"""The recipes, in order; K databases take the first K (cycling when K is larger)."""


def recipes(engine: Engine, h: Hints, k: int, seed: int, pair_key: str,
            sample_limit: int = 2000) -> Iterator[Recipe]:
    """The ``k`` test databases of one pair, in order.

    >>> from evalharness_sql.engines import SQLiteEngine
    >>> engine = SQLiteEngine.from_ddl(
    ...     "CREATE TABLE p (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
    ...     "CREATE TABLE c (id INTEGER PRIMARY KEY, p_id INT REFERENCES p(id), x REAL)")
    >>> h = Hints(tables={"p", "c"}, literals={("c", "x"): [9.5, 10.5]})
    >>> dbs = list(recipes(engine, h, 3, seed=0, pair_key="example"))
    >>> [d.kind for d in dbs]
    ['generated:pass', 'generated:fail', 'generated:fail,ties,duplicates']
    >>> parents = {r[0] for r in dbs[0].data["p"]}
    >>> all(r[1] in parents or r[1] is None for d in dbs[:1] for r in d.data["c"])
    True
    """
    schema = engine.schema()
    used = sorted(h.tables) or sorted(k for k, t in schema.tables.items() if not t.is_view)
    used = [t for t in used if t in schema.tables and not schema.tables[t].is_view]
    order = [t for t in schema.order() if t in used]
    real = {t: engine.rows(schema.tables[t].name, sample_limit) for t in order}
    has_data = any(real.values())
    strict = engine.name != "sqlite"
    pools = _pools(schema, order, real, h, strict)
    base = zlib.crc32(pair_key.encode("utf-8"))
    variants: dict[str, int] = {}
    for i, kind in enumerate(plan(h, k)):
        rng = random.Random((seed * 1_000_003 + base) * 7919 + i)
        if kind.startswith("perturbed") and has_data:
            data, steps = _perturbed(schema, order, real, h, pools, rng, kind.split(":")[1])
        else:
            flavour = kind.split(":")[1] if ":" in kind else "random"
            if kind.startswith("perturbed"):
                flavour = "fail," + flavour
                kind = "generated:" + flavour
            variant = variants[flavour] = variants.get(flavour, -1) + 1
            data, steps = _generated(schema, order, h, pools, rng, flavour, variant)
        changed = conform(schema, order, data)  # real rows may break their own schema
        if changed:
            steps.append(f"{changed} values or rows outside the schema's types and keys "
                         "converted or dropped")
        yield Recipe(i + 1, kind, rng.randrange(2**31), steps, data)


def plan(h: Hints, k: int) -> list[str]:
    """The kinds of a pair's ``k`` test databases: :data:`PLAN` (cycled), with databases
    aimed at the queries' aggregate thresholds (six per :class:`Aim`: its boundaries, with
    and without a NULL-keyed group) and at keys the schema does not declare (3) spread over it
    from the second database on — a third of the databases at most.

    >>> h = Hints(aggregates=[Aim("count", None, False, 4)])
    >>> plan(h, 8)
    ['generated:pass', 'generated:aggregate', 'generated:fail', 'perturbed:ties,duplicates', \
'generated:aggregate', 'generated:near,nulls', 'generated:pass,sparse', 'generated:fail,nulls']
    """
    base = [PLAN[i % len(PLAN)] for i in range(k)]
    aggregate = ["generated:aggregate"] * min(10, 6 * len(h.aggregates))
    undeclared = ["generated:undeclared"] * (3 if h.grouped else 0)
    special = [kind for n in range(10) for kind in (aggregate[n:n + 1] + undeclared[n:n + 1])]
    special = special[:max(2, k // 3)]  # two thirds of the databases stay general
    if not special:
        return base
    step = 3 if len(special) * 3 <= k else 2
    out = base[:1]
    rest = base[1:]
    while len(out) < k and (special or rest):
        if special:
            out.append(special.pop(0))
        out.extend(rest[:step - 1])
        rest = rest[step - 1:]
    return out[:k]


# --------------------------------------------------------------------------------------------
# Value pools
# --------------------------------------------------------------------------------------------

_DEFAULTS: dict[str, list[Any]] = {
    "int": [0, 1, 2, 3, -1, 10],
    "real": [0.0, 1.5, 2.5, 10.0, -1.0],
    "text": ["a", "b", "A", "", "9", "10"],
    "date": ["2020-01-01", "2020-06-15", "2021-12-31 23:59:59", "2019-02-28"],
    "bool": [0, 1],
}


def _fits(value: Any, column: Column, strict: bool) -> bool:
    """Whether a value is one the column can hold (its declared type, its CHECK list)."""
    if value is None:
        return False
    if column.allowed is not None and value not in column.allowed:
        return False
    kind = column.kind
    if kind == "bool":  # 0 and 1, or a boolean spelt as text ('T', 'Y', 'true')
        return (value in (0, 1) and not isinstance(value, float)) or isinstance(value, str)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "real":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "date":
        if not isinstance(value, str):
            return False
        return bool(_DATE.match(value)) if strict else True
    return isinstance(value, str)


@dataclass
class Pool:
    """Candidate values of one column, in tiers: values that pass the gold query's
    comparisons of it (``passing``), values that fail them by a little (``failing``), other
    values around the literals the queries use (``near``), and everything else (values of the
    real data and type defaults: ``other``)."""

    passing: list[Any]
    failing: list[Any]
    near: list[Any]
    other: list[Any]
    exact: list[Any] = field(default_factory=list)
    boundary: list[Any] = field(default_factory=list)
    """Values that pass the predicted query's comparisons."""
    boundary_failing: list[Any] = field(default_factory=list)
    """Values that fail them by a little."""

    @property
    def filtered(self) -> bool:
        return bool(self.passing or self.failing or self.boundary or self.boundary_failing)


def _pools(schema: Schema, order: list[str], real: dict[str, list[tuple[Any, ...]]],
           h: Hints, strict: bool) -> dict[ColumnKey, Pool]:
    """Candidate values of every column (see :class:`Pool`)."""
    tiers = [{k: list(v) for k, v in t.items()}
             for t in (h.literals, h.near, h.passing, h.failing, h.boundary,
                       h.boundary_failing)]
    # a literal compared with a foreign key, or with a column joined to another, matters to
    # the other column too: `flights.source = 'APG'` needs an airport 'APG'
    pairs = list(h.links)
    for t in order:
        for fk in schema.tables[t].foreign_keys:
            for col, ref in zip(fk.columns, fk.ref_columns, strict=False):
                if ref:
                    pairs.append(((t, col.lower()), (fk.table.lower(), ref.lower())))
    for a, b in pairs:
        for tier in tiers:
            merged = _unique([*tier.get(a, []), *tier.get(b, [])])
            if merged:
                tier[a] = tier[b] = merged
    exact_of, near_of, pass_of, fail_of, boundary_of, boundary_fail_of = tiers
    pools: dict[ColumnKey, Pool] = {}
    for t in order:
        table = schema.tables[t]
        rows = real.get(t) or []
        for i, column in enumerate(table.columns):
            key = (t, column.name.lower())

            def fit(values: list[Any], column: Column = column) -> list[Any]:
                return _unique(v for v in values if _fits(v, column, strict))

            exact = fit(exact_of.get(key, []))
            passing, failing = fit(pass_of.get(key, [])), fit(fail_of.get(key, []))
            boundary = [v for v in fit(boundary_of.get(key, []))
                        if v not in passing and v not in failing]
            boundary_failing = [v for v in fit(boundary_fail_of.get(key, []))
                                if v not in passing and v not in failing and v not in boundary]
            extra = []
            for v in exact:  # a REAL column compared with 30 also needs 29.5 and 30.5
                if column.kind == "real" and isinstance(v, int) and not isinstance(v, bool):
                    extra += [v - 0.5, v + 0.5]
                elif column.kind == "int" and isinstance(v, float):
                    extra += [math.floor(v), math.ceil(v)]
            near = [v for v in fit([*near_of.get(key, []), *extra])
                    if v not in exact and v not in passing and v not in failing]
            if not exact and key in h.columns:  # an untied literal may be meant for it
                near = fit([*near, *h.free])[:8]
            existing = _unique(r[i] for r in rows if r[i] is not None)
            existing = sorted(existing, key=lambda v: (type(v).__name__, str(v)))
            if len(existing) > 12:
                step = len(existing) / 12
                existing = [existing[int(j * step)] for j in range(12)]
            taken = {(type(v).__name__, v) for v in [*exact, *near, *passing, *failing,
                                                        *boundary, *boundary_failing]}
            defaults = list(column.allowed) if column.allowed is not None \
                else _DEFAULTS[column.kind]
            other = [v for v in fit([*existing, *defaults])
                     if (type(v).__name__, v) not in taken]
            pools[key] = Pool(passing, failing, near, other, exact, boundary,
                              boundary_failing)
    for a, b in h.links:  # joined columns draw from one pool, so that joins find partners
        if a in pools and b in pools:
            pa, pb = pools[a], pools[b]
            tiers = [_unique([*x, *y]) for x, y in zip(
                (pa.passing, pa.failing, pa.near, pa.other, pa.exact, pa.boundary,
                 pa.boundary_failing),
                (pb.passing, pb.failing, pb.near, pb.other, pb.exact, pb.boundary,
                 pb.boundary_failing), strict=True)]
            for k in (a, b):  # each column keeps the values of its own type
                column = schema.column(*k)
                if column is None:
                    continue
                own = [[v for v in (coerce(column, x)[1] for x in tier)
                        if v is not None and _fits(v, column, strict)] for tier in tiers]
                pools[k] = Pool(*(_unique(tier) for tier in own))
    return pools


def _pick(values: list[Any], rng: random.Random, lo: int, hi: int) -> list[Any]:
    return rng.sample(values, min(len(values), rng.randint(lo, hi))) if values else []


def _narrow(pool: Pool, rng: random.Random, mode: str, size: int) -> list[Any]:
    """A small pool for one database: small so that ties and duplicates are common.

    ``pass``: only values that pass the gold query's comparisons (rows get through its
    filters); ``fail``: passing and failing values mixed (for the one column whose filter the
    database tests); ``near``: values around every literal; ``random``: anything.
    """
    chosen: list[Any] = []
    if mode == "pass" and pool.filtered:
        chosen = _pick(pool.passing, rng, 3, 3) or _pick(pool.exact, rng, 1, 2)
        if rng.random() < 0.15:
            chosen += _pick(pool.failing, rng, 1, 1)
    elif mode == "fail" and pool.filtered:
        # the closest values on both sides always (``x > 30``: 31 and 30), others by chance
        chosen = pool.passing[:1] + _pick(pool.passing[1:], rng, 0, 1)
        chosen += pool.failing[:1] + _pick(pool.failing[1:], rng, 0, 1)
        chosen += _pick(pool.boundary, rng, 2, 2) + _pick(pool.boundary_failing, rng, 1, 1)
    elif mode in ("pass", "fail"):
        chosen = _pick(pool.exact, rng, 1, 2)
        if not chosen or rng.random() < 0.3:
            chosen += _pick(pool.near, rng, 0, 1) + _pick(pool.other, rng, 1, max(1, size))
    elif mode == "near":
        chosen = _pick(pool.passing, rng, 1, 2) + _pick(pool.failing, rng, 1, 2)
        chosen += _pick(pool.boundary, rng, 0, 2) + _pick(pool.boundary_failing, rng, 0, 1)
        chosen += _pick(pool.exact, rng, 0, 1) + _pick(pool.near, rng, 0, 2)
        if not chosen or rng.random() < 0.3:
            chosen += _pick(pool.other, rng, 1, 1)
    else:
        everything = _unique([*pool.passing, *pool.failing, *pool.boundary,
                              *pool.boundary_failing, *pool.exact, *pool.near])
        chosen = _pick(everything, rng, 0, 2)
        if len(chosen) < size:
            chosen += _pick(pool.other, rng, size - len(chosen), size - len(chosen))
    return _unique(chosen) or (pool.other[:1] if pool.other else [0])


def _generated(schema: Schema, order: list[str], h: Hints, pools: dict[ColumnKey, Pool],
               rng: random.Random, flavour: str, variant: int = 0
               ) -> tuple[dict[str, list[tuple[Any, ...]]], list[str]]:
    flags = set(flavour.split(","))
    aimed = bool(flags & {"aggregate", "undeclared"})
    mode = "pass" if aimed else \
        next((m for m in ("pass", "fail", "near", "random") if m in flags), "random")
    null_rate = 0.3 if "nulls" in flags else (0.1 if rng.random() < 0.25 and not aimed else 0.0)
    width = rng.choice([1, 2, 2, 3, 4])
    sizes = [0, 1, 1, 2, 3] if "sparse" in flags else [1, 2, 3, 3, 4, 5, 6]
    data: dict[str, list[tuple[Any, ...]]] = {}
    links = _link_map(h)
    big = [c for c in h.counts if 1 < c <= 60]
    filtered = sorted(k for k in pools if k[0] in order and pools[k].filtered)
    contested = [k for k in filtered if k in h.contested]
    if contested and rng.random() < 0.7:
        filtered = contested
    tested = rng.choice(filtered) if mode == "fail" and filtered else None
    steps = [f"generated from the schema ({mode} values"
             + (f" — {tested[0]}.{tested[1]} tested" if tested else "")
             + f", pools of up to {width}, NULL rate {null_rate:g})"]
    empty = rng.choice(order) if "sparse" in flags and order else None
    nullable = sorted(k for k in h.columns if k[0] in order and (c := schema.column(*k))
                      is not None and not c.notnull)
    preferred = [k for k in nullable if k in h.sensitive or k in h.contested]
    if preferred and rng.random() < 0.7:
        nullable = preferred
    all_null = rng.choice(nullable) if "nulls" in flags and nullable and \
        rng.random() < 0.5 else None
    if all_null:
        steps[0] += f"; every {all_null[0]}.{all_null[1]} NULL"
    good: dict[str, list[tuple[Any, ...]]] = {}
    for t in order:
        table = schema.tables[t]
        n = 0 if t == empty else rng.choice(sizes)
        if len(table.foreign_keys) >= 2:  # a junction table: more rows, more combinations
            n *= 2
        if "wide" in flags and big:
            n = max(n, rng.choice(big) + rng.choice([0, 1]))
        elif "wide" in flags:
            n = rng.choice([6, 8, 10, 12])
        narrowed = {}
        for c in table.columns:
            key = (t, c.name.lower())
            column_mode = mode if mode != "fail" else ("fail" if key == tested else "pass")
            pool_size = 1 if "wide" in flags and not pools[key].filtered \
                else rng.randint(1, width)
            narrowed[key[1]] = [None] if key == all_null else \
                _narrow(pools[key], rng, column_mode, pool_size)
        rows = _fill(schema, table, n, narrowed, data, links, rng, null_rate,
                     skew="skew" in flags, good=good)
        data[t] = rows
        checks = [(i, set(map(repr, pools[(t, c.name.lower())].passing)))
                  for i, c in enumerate(table.columns) if pools[(t, c.name.lower())].passing]
        good[t] = [r for r in rows if all(repr(r[i]) in ok for i, ok in checks)]
        steps.append(f"{len(rows)} rows in {table.name}")
    if "aggregate" in flags and h.aggregates:
        steps.append(_grow_group(schema, order, data, good, h, pools, rng, variant))
    if "undeclared" in flags and h.grouped:
        steps.append(_repeat_keys(schema, order, data, good, h, pools, rng, variant))
    return data, steps


# --------------------------------------------------------------------------------------------
# Groups at an aggregate's threshold, and keys the schema does not declare
# --------------------------------------------------------------------------------------------

MAX_GROUP = 60
"""Most rows of one group built for an aggregate threshold (a bigger threshold is left to
luck)."""


def _boundaries(aim: Aim, column: Column | None) -> list[int | float]:
    """The values to build ``aim``'s group on: just below, on and just above its threshold.

    >>> _boundaries(Aim("count", None, False, 4), None)
    [3, 4, 5]
    >>> _boundaries(Aim("sum", ("t", "x"), False, 100), Column("x", "REAL"))
    [99.5, 100, 100.5, 99.995, 100.005]
    """
    v = aim.value
    if aim.function == "count":
        return [n for n in (math.floor(v) - 1, math.ceil(v), math.floor(v) + 1)
                if 0 < n <= MAX_GROUP]
    if column is not None and column.kind == "int":
        return [math.floor(v) - 1, v if float(v).is_integer() else math.ceil(v),
                math.floor(v) + 1]
    return [v - 0.5, v, v + 0.5, round(v - 0.005, 6), round(v + 0.005, 6)]


def _grow_group(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]],
                good: dict[str, list[tuple[Any, ...]]], h: Hints, pools: dict[ColumnKey, Pool],
                rng: random.Random, variant: int) -> str:
    """Make one group of the queries hit an aggregate's threshold exactly, or miss it by one:
    a row that passes the gold query's filters is copied (its keys made fresh, its foreign
    keys and grouped columns kept, so the copies join and group with it) until the group has
    the size, the sum, the average, the least or the greatest value wanted; ``variant`` picks
    the aggregate and the boundary."""
    targets = [(aim, b) for aim in h.aggregates
               for b in _boundaries(aim, schema.column(*aim.column) if aim.column else None)]
    if not targets:
        return "no aggregate threshold to aim at"
    aim, target = targets[variant % len(targets)]
    key = _group_table(schema, order, data, h, aim)
    if key is None:
        return f"no table to build a group for {_describe(aim)} in"
    table = schema.tables[key]
    names = [c.name.lower() for c in table.columns]
    template = list(_template(schema, order, data, good, key, rng, h))
    column = names.index(aim.column[1]) if aim.column else None
    nulled = []
    if (variant // len(targets)) % 2 == 1:  # every other round: the group of NULL keys
        for i, c in enumerate(table.columns):
            if (key, names[i]) in h.grouped and not c.notnull and i != column and \
                    names[i] not in _fk_columns(table):
                template[i] = None
                nulled.append(c.name)
    # the group: rows of the table that share the template's grouped and foreign-key values
    linked = {c for pair in h.links for (lt, c) in pair if lt == key}
    fixed = [i for i, n in enumerate(names)
             if (key, n) in h.sensitive or n in _fk_columns(table) or n in linked]
    fixed = [i for i in fixed if i != column and names[i] not in _own_key_columns(table)]
    same = [r for r in data[key] if all(r[i] == template[i] for i in fixed)]
    values = _group_values(aim, target, table.columns[column] if column is not None else None,
                           pools.get(aim.column) if aim.column else None, template, column)
    if values is None:
        return f"{_describe(aim)} cannot reach {target} with the column's values"
    kept = [r for r in data[key] if r not in same]
    rows = []
    for n, value in enumerate(values):
        row = list(template)
        if column is not None:
            row[column] = value
        rows.append(_fresh_keys(table, row, n, kept + rows))
    data[key] = kept + rows
    # a row the group joins on by a column that is not declared unique: one of it, or the
    # join multiplies the group
    for a, b in h.links:
        for (t, c), (pt, pc) in ((a, b), (b, a)):
            if t != key or pt == key or not data.get(pt) or c not in names:
                continue
            pnames = [x.name.lower() for x in schema.tables[pt].columns]
            if pc not in pnames:
                continue
            value, j = key_value(template[names.index(c)]), pnames.index(pc)
            kept, seen = [], False
            for r in data[pt]:
                if key_value(r[j]) == value:
                    if seen:
                        continue
                    seen = True
                kept.append(r)
            data[pt] = kept
    return (f"a group of {len(rows)} rows in {table.name} for {_describe(aim)} "
            f"on {target}" + (f", grouped by NULL {', '.join(nulled)}" if nulled else ""))


def _describe(aim: Aim) -> str:
    inside = "*" if aim.column is None else \
        ("DISTINCT " if aim.distinct else "") + ".".join(aim.column)
    return f"{aim.function}({inside}) vs {aim.value}"


def _fk_columns(table: Table) -> set[str]:
    return {c.lower() for fk in table.foreign_keys for c in fk.columns}


def _own_key_columns(table: Table) -> set[str]:
    """Columns of the table's keys that are not foreign keys: made fresh in copies."""
    keys = {c.lower() for c in table.primary_key}
    for u in table.unique:
        keys.update(c.lower() for c in u)
    return keys - _fk_columns(table)


def _group_table(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]],
                 h: Hints, aim: Aim) -> str | None:
    """The table whose rows the aggregate counts: the aggregated column's; for ``count(*)``
    the last table the queries read (children come after their parents) that has rows and
    whose copies can share a group."""
    if aim.column is not None:
        return aim.column[0] if data.get(aim.column[0]) else None
    candidates = [t for t in reversed(order) if data.get(t)]
    for t in candidates:
        table = schema.tables[t]
        pk = {c.lower() for c in table.primary_key}
        grouped = {c for (gt, c) in h.sensitive if gt == t}
        if not pk or not pk <= grouped:
            return t
    return candidates[0] if candidates else None


def _template(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]],
              good: dict[str, list[tuple[Any, ...]]], key: str, rng: random.Random,
              h: Hints) -> tuple[Any, ...]:
    """A row of the table that passes the gold query's filters, whose parents (by foreign
    key or by a join of the queries) pass them too where there are such."""
    table = schema.tables[key]
    names = [c.name.lower() for c in table.columns]
    partners: list[tuple[int, str, int]] = []
    for fk in table.foreign_keys:
        parent = fk.table.lower()
        if len(fk.columns) == 1 and parent in data and fk.columns[0].lower() in names:
            pnames = [c.name.lower() for c in schema.tables[parent].columns]
            ref = (fk.ref_columns[0] or "").lower()
            if ref in pnames:
                partners.append((names.index(fk.columns[0].lower()), parent, pnames.index(ref)))
    for a, b in h.links:
        for (t, c), (pt, pc) in ((a, b), (b, a)):
            if t == key and (pt, pc) != (t, c) and pt in data and c in names:
                pnames = [x.name.lower() for x in schema.tables[pt].columns]
                if pc in pnames:
                    partners.append((names.index(c), pt, pnames.index(pc)))
    rows = good.get(key) or data[key]
    best = []
    for row in rows:
        if all(any(key_value(p[j]) == key_value(row[i]) for p in (good.get(pt) or data[pt]))
               for i, pt, j in partners):
            best.append(row)
    if best or not partners:
        return rng.choice(best or rows)
    # no row joins: point one at partners (a self-join's manager, a parent that passes)
    row = list(rng.choice(rows))
    keys = _own_key_columns(table)
    for i, pt, j in partners:
        values = [p[j] for p in (good.get(pt) or data[pt]) if p[j] is not None]
        if values and names[i] not in keys:
            row[i] = rng.choice(values)
    return tuple(row)


def _group_values(aim: Aim, target: int | float, column: Column | None, pool: Pool | None,
                  template: list[Any], index: int | None) -> list[Any] | None:
    """The aggregated column's values in the group (one per row), or None when the column's
    type or CHECK list cannot give them.

    >>> _group_values(Aim("count", None, False, 4), 5, None, None, [1], None)
    [None, None, None, None, None]
    >>> _group_values(Aim("sum", ("t", "x"), False, 20), 20,
    ...               Column("x", "INT", allowed=(1, 2, 3, 4, 5, 6)), None, [1], 0)
    [6, 6, 6, 2]
    >>> _group_values(Aim("count", ("t", "x"), True, 3), 3, Column("x", "TEXT"), None, ["a"], 0)
    ['a', 'a1', 'a2']
    """
    allowed = list(column.allowed) if column is not None and column.allowed else None
    current = template[index] if index is not None else None
    if aim.function == "count":
        n = int(target)
        if aim.column is None:
            return [current] * n
        if not aim.distinct:
            value = current if current is not None else _some_value(column, pool)
            return [value] * n
        return _distinct_values(column, pool, current, n)
    assert column is not None
    integral = column.kind in ("int", "bool")
    if integral and not float(target).is_integer():
        return None
    if aim.function in ("min", "max"):
        other = target + (1 if aim.function == "min" else -1)
        values = [target, other]
        if allowed is not None:
            values = [v for v in values if v in allowed][:2]
            return values if target in values else None
        return [int(v) if integral else v for v in values]
    if aim.function == "avg":
        if allowed is not None:
            if target in allowed:
                return [target, target]
            pairs = [(a, b) for a in allowed for b in allowed
                     if isinstance(a, int | float) and isinstance(b, int | float)
                     and a + b == 2 * target]
            return list(pairs[0]) if pairs else None
        spread = 1 if integral else 0.5
        return [target - spread, target + spread] if not integral else \
            [int(target) - 1, int(target) + 1]
    # sum
    if allowed is not None:
        numbers = sorted((v for v in allowed if isinstance(v, int | float) and v > 0),
                         reverse=True)
        values, left = [], target
        for v in numbers:
            while left >= v and len(values) < MAX_GROUP:
                values.append(v)
                left -= v
        return values if left == 0 and values else None
    if integral:
        half = int(target) // 2
        return [half, int(target) - half]
    return [target / 2, target - target / 2]


def _some_value(column: Column | None, pool: Pool | None) -> Any:
    if pool is not None:
        for values in (pool.passing, pool.exact, pool.other, pool.near):
            if values:
                return values[0]
    return _DEFAULTS[column.kind][1] if column is not None else 1


def _distinct_values(column: Column | None, pool: Pool | None, current: Any,
                     n: int) -> list[Any] | None:
    kind = column.kind if column is not None else "text"
    if column is not None and column.allowed:
        values = list(column.allowed)[:n]
        return values if len(values) == n else None
    start = current if current is not None else _some_value(column, pool)
    if kind == "int":
        start = start if isinstance(start, int) else 0
        return [start + i for i in range(n)]
    if kind == "real":
        start = start if isinstance(start, int | float) else 0.0
        return [start + i for i in range(n)]
    if kind == "bool":
        return [0, 1][:n] if n <= 2 else None
    if kind == "date":
        base = date(2020, 1, 1)
        return [(base + timedelta(days=i)).isoformat() for i in range(n)]
    start = str(start)
    return [start] + [f"{start}{i}" for i in range(1, n)]


def _fresh_keys(table: Table, row: list[Any], n: int,
                existing: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    """The row with fresh values in its own key columns (not in ``existing``)."""
    names = [c.name.lower() for c in table.columns]
    for name in _own_key_columns(table):
        i = names.index(name)
        column = table.columns[i]
        taken = {key_value(r[i]) for r in existing}
        if column.kind in ("int", "real", "bool"):
            value = max((v for v in taken if isinstance(v, int | float)), default=0) + 1
            row[i] = int(value) if column.kind != "real" else float(value)
        elif column.kind == "date":
            day = date(2030, 1, 1) + timedelta(days=n)
            while day.isoformat() in taken:
                day += timedelta(days=1)
            row[i] = day.isoformat()
        else:
            text, m = f"{row[i]}-{n}", n
            while text in taken:
                m += 1
                text = f"{row[i]}-{m}"
            row[i] = text
    return tuple(row)


def _repeat_keys(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]],
                 good: dict[str, list[tuple[Any, ...]]], h: Hints, pools: dict[ColumnKey, Pool],
                 rng: random.Random, variant: int) -> str:
    """Rows that repeat a grouped, DISTINCT or joined column the schema does not declare
    unique, with the other columns different: ``GROUP BY id, dept`` and ``GROUP BY id``
    differ only when one id has two departments."""
    columns = sorted(k for k in h.grouped if data.get(k[0]))
    if not columns:
        return "no undeclared key to repeat"
    key = columns[variant % len(columns)]
    table = schema.tables[key[0]]
    names = [c.name.lower() for c in table.columns]
    template = list(_template(schema, order, data, good, key[0], rng, h))
    i = names.index(key[1])
    rows = data[key[0]]
    if len(rows) > 2 and len({r[i] for r in rows}) < 2 and key[1] not in _fk_columns(table):
        # every row holds one value: the others than the template get other values, so that
        # the repeated value is not the only one
        values = _distinct_values(table.columns[i], pools.get(key), template[i], len(rows) + 1)
        if values is not None and len(values) > len(rows):
            it = iter(values[1:])
            data[key[0]] = [r if list(r) == template else (*r[:i], next(it), *r[i + 1:])
                            for r in rows]
    if key in h.ordered:  # a tie at the cut: repeat the first row of the order
        i = names.index(key[1])
        rows = [r for r in data[key[0]] if r[i] is not None]
        numbers = [r for r in rows if isinstance(r[i], int | float)]
        if numbers or rows:
            pick = max if h.ordered[key] else min
            template = list(pick(numbers or rows, key=lambda r: r[i] if numbers else str(r[i])))
    if template[names.index(key[1])] is None:
        return f"no value of {table.name}.{key[1]} to repeat"
    protected = _fk_columns(table) | {key[1]}
    row = list(template)
    changed = []
    for i, column in enumerate(table.columns):
        name = names[i]
        if name in protected or name in _own_key_columns(table):
            continue
        pool = pools.get((key[0], name))
        options = [v for v in ([*pool.passing, *pool.exact, *pool.other] if pool else [])
                   if v != row[i]]
        if options:
            row[i] = rng.choice(options[:4])
            changed.append(column.name)
    copy = _fresh_keys(table, row, 1, data[key[0]])
    data[key[0]].append(copy)
    children = _copy_children(schema, order, data, key[0], tuple(template), copy,
                              one_more=variant % 3 == 2, repeated=names.index(key[1]))
    return (f"a second {table.name} row with {table.name}.{key[1]} = "
            f"{template[names.index(key[1])]!r} and other {', '.join(changed) or 'keys'}"
            + (f", with copies of its {children} child rows" if children else ""))


def _copy_children(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]],
                   parent: str, original: tuple[Any, ...], copy: tuple[Any, ...],
                   *, one_more: bool = False, repeated: int | None = None) -> int:
    """Give ``copy`` (a new row of ``parent``) copies of ``original``'s children in the
    tables of ``data``, so that counts per parent are tied; with ``one_more``, another parent
    whose ``repeated`` column differs gets one child more than ``original`` (so that counts
    summed over the repeated value and counts per parent put different rows first). Returns
    how many rows were added."""
    pnames = [c.name.lower() for c in schema.tables[parent].columns]
    added = 0
    for t in order:
        if t == parent:
            continue
        table = schema.tables[t]
        names = [c.name.lower() for c in table.columns]
        for fk in table.foreign_keys:
            if fk.table.lower() != parent or len(fk.columns) != 1:
                continue
            ref = (fk.ref_columns[0] or "").lower()
            col = fk.columns[0].lower()
            if ref not in pnames or col not in names:
                continue
            j, i = pnames.index(ref), names.index(col)
            if key_value(original[j]) == key_value(copy[j]):
                continue  # the reference did not change: the children are shared already
            children = [r for r in data[t] if key_value(r[i]) == key_value(original[j])][:10]
            for n, child in enumerate(children):
                row = list(child)
                row[i] = copy[j]
                data[t].append(_fresh_keys(table, row, n + 2, data[t]))
                added += 1
            others = [p for p in data[parent] if p[j] is not None and
                      key_value(p[j]) not in (key_value(original[j]), key_value(copy[j])) and
                      (repeated is None or p[repeated] != original[repeated])]
            if one_more and len(children) >= 2 and others:
                other = others[0]
                data[t] = [r for r in data[t] if key_value(r[i]) != key_value(other[j])]
                for n, child in enumerate(children + children[:1]):
                    row = list(child)
                    row[i] = other[j]
                    data[t].append(_fresh_keys(table, row, n + 20, data[t]))
                    added += 1
    return added


def _link_map(h: Hints) -> dict[ColumnKey, list[ColumnKey]]:
    out: dict[ColumnKey, list[ColumnKey]] = {}
    for a, b in h.links:
        out.setdefault(a, []).append(b)
        out.setdefault(b, []).append(a)
    return out


def _fill(schema: Schema, table: Table, n: int, narrowed: dict[str, list[Any]],
          data: dict[str, list[tuple[Any, ...]]], links: dict[ColumnKey, list[ColumnKey]],
          rng: random.Random, null_rate: float, *, skew: bool = False,
          good: dict[str, list[tuple[Any, ...]]] | None = None) -> list[tuple[Any, ...]]:
    """``n`` rows (fewer when keys run out) that respect the table's keys. Children mostly
    pick parents whose values pass the gold query's filters (``good``), so that joins keep
    rows; with ``skew``, some parents get many children and others few."""
    weights: dict[str, list[int]] = {}

    def parent_row(parent: str) -> tuple[Any, ...]:
        rows = data[parent]
        passing = (good or {}).get(parent)
        if passing and len(passing) < len(rows) and rng.random() < 0.7:
            return rng.choice(passing)
        if not skew:
            return rng.choice(rows)
        if parent not in weights:
            weights[parent] = [rng.choice([1, 1, 2, 3, 5]) for _ in rows]
        return rng.choices(rows, weights=weights[parent])[0]

    t = table.name.lower()
    names = [c.name.lower() for c in table.columns]
    fk_of: dict[str, tuple[str, int]] = {}
    for fk in table.foreign_keys:
        parent = fk.table.lower()
        if parent not in data:
            continue  # a parent the queries do not read: its rows cannot matter
        pnames = [c.name.lower() for c in schema.tables[parent].columns]
        for col, ref in zip(fk.columns, fk.ref_columns, strict=False):
            if ref and ref.lower() in pnames and col.lower() in names:
                fk_of[col.lower()] = (parent, pnames.index(ref.lower()))
    for col, (parent, _) in fk_of.items():
        column = table.column(col)
        if not data[parent] and column is not None and column.notnull:
            return []  # every row would need a parent, and there is none
    keys = [tuple(k.lower() for k in table.primary_key)] if table.primary_key else []
    n_pk = len(keys)
    keys += [tuple(k.lower() for k in u) for u in table.unique]
    seen: list[set[tuple[Any, ...]]] = [set() for _ in keys]
    rows: list[tuple[Any, ...]] = []
    fresh = 100
    joined: dict[str, list[tuple[str, int]]] = {}  # the columns each column is joined with
    for name in names:
        found = []
        for pt, pc in links.get((t, name), []):
            if pt in data and data[pt]:
                found.append((pt, [c.name.lower() for c in schema.tables[pt].columns].index(pc)))
        joined[name] = found
    for _ in range(n * 3):
        if len(rows) >= n:
            break
        row: dict[str, Any] = {}
        for column, name in zip(table.columns, names, strict=True):
            if name in fk_of:
                parent, idx = fk_of[name]
                if data[parent] and (column.notnull or rng.random() > 0.15):
                    # in the child's type: an INTEGER key is referred to as '3' by TEXT
                    row[name] = coerce(column, parent_row(parent)[idx])[1]
                else:
                    row[name] = None
                continue
            if not column.notnull and rng.random() < null_rate:
                row[name] = None
                continue
            partners = joined[name]
            if partners and rng.random() < 0.7:
                pt, pidx = rng.choice(partners)
                fits, value = coerce(column, parent_row(pt)[pidx])
                if fits and (value is not None or not column.notnull):
                    row[name] = value
                    continue
            row[name] = rng.choice(narrowed[name])
        ok = True
        for i, key in enumerate(keys):
            values = tuple(row[k] for k in key)
            if i >= n_pk and None in values:
                continue  # NULLs never collide in a UNIQUE constraint
            if values in seen[i] or (i < n_pk and None in values):
                free_columns = [k for k in key if k not in fk_of]
                if not free_columns:
                    ok = False
                    continue
                k = rng.choice(free_columns)
                column = table.column(k)
                fresh += 1
                row[k] = fresh if column is None or column.kind in ("int", "real") \
                    else f"k{fresh}"
                values = tuple(row[c] for c in key)
                if values in seen[i] or (i < n_pk and None in values):
                    ok = False
        if not ok:
            continue
        for i, key in enumerate(keys):
            seen[i].add(tuple(row[k] for k in key))
        rows.append(tuple(row[c] for c in names))
    return _self_references(table, rows, rng)


def _self_references(table: Table, rows: list[tuple[Any, ...]],
                     rng: random.Random) -> list[tuple[Any, ...]]:
    """Point a table's foreign keys into itself (``employee.mgr_id``) at its own rows: one
    row is a root (NULL, or itself where NULL is not allowed), the others refer to an
    earlier row."""
    names = [c.name.lower() for c in table.columns]
    for fk in table.foreign_keys:
        if fk.table.lower() != table.name.lower() or len(fk.columns) != 1:
            continue
        col, ref = fk.columns[0].lower(), (fk.ref_columns[0] or "").lower()
        if col not in names or ref not in names:
            continue
        i, j = names.index(col), names.index(ref)
        column = table.columns[i]
        out = []
        for n, row in enumerate(rows):
            if n == 0 or (not column.notnull and rng.random() < 0.2):
                target = None if not column.notnull else row[j]
            else:
                target = rng.choice(out[:n])[j]
            out.append((*row[:i], coerce(column, target)[1], *row[i + 1:]))
        rows = out
    return rows


# --------------------------------------------------------------------------------------------
# Perturbed copies of the real data
# --------------------------------------------------------------------------------------------


def _perturbed(schema: Schema, order: list[str], real: dict[str, list[tuple[Any, ...]]],
               h: Hints, pools: dict[ColumnKey, tuple[list[Any], list[Any]]],
               rng: random.Random, perturbations: str
               ) -> tuple[dict[str, list[tuple[Any, ...]]], list[str]]:
    data = _sample(schema, order, real, rng, pools)
    steps = ["sampled " + ", ".join(f"{len(data[t])} of {len(real[t])} rows of "
                                    f"{schema.tables[t].name}" for t in order)]
    for name in perturbations.split(","):
        step = _PERTURBATIONS[name](schema, order, data, h, pools, rng)
        if step:
            steps.append(step)
    return data, steps


def _sample(schema: Schema, order: list[str], real: dict[str, list[tuple[Any, ...]]],
            rng: random.Random, pools: dict[ColumnKey, Pool]
            ) -> dict[str, list[tuple[Any, ...]]]:
    """A random sample of each table, children first, keeping the parents they refer to and
    a few rows holding the values the queries compare with."""
    chosen: dict[str, list[tuple[Any, ...]]] = {}
    needed: dict[str, set[tuple[str, Any]]] = {t: set() for t in order}
    for t in reversed(order):
        rows = real[t]
        table = schema.tables[t]
        m = min(len(rows), rng.choice([2, 3, 4, 6, 8, 12]))
        picked = set(rng.sample(range(len(rows)), m)) if rows else set()
        names = [c.name.lower() for c in table.columns]
        wanted = {i: set(pools[(t, n)].exact) if (t, n) in pools else set()
                  for i, n in enumerate(names)}
        hits = [j for j, r in enumerate(rows)
                if any(wanted[i] and r[i] in wanted[i] for i in range(len(names)))]
        if hits:
            picked.update(rng.sample(hits, min(len(hits), rng.choice([1, 2, 4]))))
        for i, r in enumerate(rows):
            if any((col, r[names.index(col)]) in needed[t] for col, _ in needed[t]
                   if col in names):
                picked.add(i)
        if len(picked) > 40:
            picked = set(sorted(picked)[:40])
        chosen[t] = [rows[i] for i in sorted(picked)]
        for fk in table.foreign_keys:
            parent = fk.table.lower()
            if parent not in needed:
                continue
            for col, ref in zip(fk.columns, fk.ref_columns, strict=False):
                if col.lower() in names and ref:
                    j = names.index(col.lower())
                    needed[parent].update((ref.lower(), r[j]) for r in chosen[t]
                                          if r[j] is not None)
    # keep only children whose parents are there: the copy must respect the foreign keys
    # (also where the real data does not)
    for t in order:
        table = schema.tables[t]
        names = [c.name.lower() for c in table.columns]
        for fk in table.foreign_keys:
            parent = fk.table.lower()
            if parent not in chosen:
                continue
            pnames = [c.name.lower() for c in schema.tables[parent].columns]
            for col, ref in zip(fk.columns, fk.ref_columns, strict=False):
                if not ref or col.lower() not in names or ref.lower() not in pnames:
                    continue
                j, pj = names.index(col.lower()), pnames.index(ref.lower())
                present = {_key_value(r[pj]) for r in chosen[parent]}
                chosen[t] = [r for r in chosen[t] if r[j] is None or _key_value(r[j]) in present]
    return chosen


def _key_value(value: Any) -> Any:
    """How a foreign key matches its parent: ``'3'`` in a TEXT column matches ``3``."""
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"-?\d+", text) and text == value:
            return int(text)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _key_columns(table: Table) -> set[str]:
    keys = {k.lower() for k in table.primary_key}
    for fk in table.foreign_keys:
        keys.update(c.lower() for c in fk.columns)
    for u in table.unique:
        keys.update(c.lower() for c in u)
    return keys


def _cells(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]], h: Hints,
           *, nullable: bool = False, numeric: bool = False, keys: bool = False
           ) -> list[tuple[str, int, Column]]:
    """Candidate columns ``(table, index, column)`` to perturb; those the queries use first."""
    out = []
    for t in order:
        if not data[t]:
            continue
        table = schema.tables[t]
        protected = _key_columns(table) if not keys else {k.lower() for k in table.primary_key}
        for i, c in enumerate(table.columns):
            name = c.name.lower()
            if name in protected and not (nullable and not c.notnull and not c.pk):
                continue
            if nullable and c.notnull:
                continue
            if numeric and c.kind not in ("int", "real"):
                continue
            out.append((t, i, c))
    used = [x for x in out if (x[0], x[2].name.lower()) in h.columns]
    return used or out


def _set(data: dict[str, list[tuple[Any, ...]]], t: str, row: int, col: int, value: Any) -> None:
    r = list(data[t][row])
    r[col] = value
    data[t][row] = tuple(r)


def _nulls(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]], h: Hints,
           pools: Any, rng: random.Random) -> str | None:
    cells = _cells(schema, order, data, h, nullable=True)
    if not cells:
        return None
    done = []
    for _ in range(rng.randint(1, 4)):
        t, i, c = rng.choice(cells)
        row = rng.randrange(len(data[t]))
        _set(data, t, row, i, None)
        done.append(f"{schema.tables[t].name}.{c.name}")
    return "NULL in " + ", ".join(sorted(set(done)))


def _duplicates(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]],
                h: Hints, pools: Any, rng: random.Random) -> str | None:
    done = []
    for t in order:
        if not data[t] or (h.tables and t not in h.tables) or rng.random() < 0.3:
            continue
        table = schema.tables[t]
        unique_cols = [{k.lower() for k in table.primary_key}] if table.primary_key else []
        unique_cols += [{k.lower() for k in u} for u in table.unique]
        names = [c.name.lower() for c in table.columns]
        row = list(rng.choice(data[t]))
        ok = True
        for cols in unique_cols:
            if len(cols) != 1:
                ok = False
                break
            (col,) = cols
            j = names.index(col)
            column = table.columns[j]
            existing = {r[j] for r in data[t]}
            if column.kind in ("int", "real"):
                value = max((v for v in existing if isinstance(v, int | float)), default=0) + 1
                row[j] = int(value) if column.kind == "int" else value
            else:
                row[j] = f"{row[j]}_copy"
            if row[j] in existing:
                ok = False
        if ok:
            data[t].append(tuple(row))
            done.append(table.name)
    return ("duplicated a row of " + ", ".join(done)) if done else None


def _ties(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]], h: Hints,
          pools: Any, rng: random.Random) -> str | None:
    cells = [x for x in _cells(schema, order, data, h) if len(data[x[0]]) > 1]
    if not cells:
        return None
    done = []
    for _ in range(rng.randint(1, 3)):
        t, i, c = rng.choice(cells)
        a, b = rng.sample(range(len(data[t])), 2)
        _set(data, t, b, i, data[t][a][i])
        done.append(f"{schema.tables[t].name}.{c.name}")
    return "tied values in " + ", ".join(sorted(set(done)))


def _shift(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]], h: Hints,
           pools: Any, rng: random.Random) -> str | None:
    cells = _cells(schema, order, data, h, numeric=True)
    if not cells:
        return None
    done = []
    for _ in range(rng.randint(1, 3)):
        t, i, c = rng.choice(cells)
        row = rng.randrange(len(data[t]))
        value = data[t][row][i]
        if isinstance(value, int | float) and not isinstance(value, bool):
            _set(data, t, row, i, value + rng.choice([-1, 1]))
            done.append(f"{schema.tables[t].name}.{c.name}")
    return ("shifted values in " + ", ".join(sorted(set(done)))) if done else None


def _literals(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]],
              h: Hints, pools: dict[ColumnKey, tuple[list[Any], list[Any]]],
              rng: random.Random) -> str | None:
    done = []
    for t in order:
        if not data[t]:
            continue
        table = schema.tables[t]
        protected = _key_columns(table)
        for i, c in enumerate(table.columns):
            pool = pools.get((t, c.name.lower()))
            tied = _unique([*pool.exact, *pool.passing, *pool.failing]) if pool else []
            if not tied or c.name.lower() in protected:
                continue
            for _ in range(rng.randint(1, 3)):
                _set(data, t, rng.randrange(len(data[t])), i, rng.choice(tied))
            done.append(f"{table.name}.{c.name}")
    return ("boundary values in " + ", ".join(done)) if done else None


def _subset(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]],
            h: Hints, pools: Any, rng: random.Random) -> str | None:
    """Drop some child rows (so that parents lose children), never a row that another row
    refers to."""
    referenced: dict[str, set[tuple[int, Any]]] = {t: set() for t in order}
    for t in order:
        names = [c.name.lower() for c in schema.tables[t].columns]
        for fk in schema.tables[t].foreign_keys:
            parent = fk.table.lower()
            if parent not in referenced:
                continue
            pnames = [c.name.lower() for c in schema.tables[parent].columns]
            for col, ref in zip(fk.columns, fk.ref_columns, strict=False):
                if ref and col.lower() in names and ref.lower() in pnames:
                    j, pj = names.index(col.lower()), pnames.index(ref.lower())
                    referenced[parent].update((pj, _key_value(r[j])) for r in data[t])
    done = []
    for t in order:
        table = schema.tables[t]
        if not table.foreign_keys or len(data[t]) < 2:
            continue
        free = [r for r in data[t]
                if not any((i, _key_value(v)) in referenced[t] for i, v in enumerate(r))]
        if not free:
            continue
        drop = rng.sample(free, rng.randint(1, max(1, len(free) // 2)))
        data[t] = [r for r in data[t] if r not in drop]
        done.append(table.name)
    return ("dropped child rows of " + ", ".join(done)) if done else None


_PERTURBATIONS = {"nulls": _nulls, "duplicates": _duplicates, "ties": _ties, "shift": _shift,
                  "literals": _literals, "subset": _subset}
