"""Rows aimed at two differences that small random databases rarely show, added to a generated
database: a group of rows exactly at an aggregate's threshold or just off it
(:func:`grow_group`: ``HAVING count(*) > 4`` needs groups of 4 and 5), and a second row
repeating a grouped, DISTINCT, joined or sorted column the schema does not declare unique
(:func:`repeat_keys`: ``GROUP BY id, dept`` and ``GROUP BY id`` differ only when one id has
two departments).
"""

from __future__ import annotations

import math
import random
from datetime import date, timedelta
from typing import Any

from evalharness_sql.contract import key_value
from evalharness_sql.engines import Column, Schema, Table
from evalharness_sql.gen_hints import Aim, ColumnKey, Hints
from evalharness_sql.gen_pools import DEFAULTS, Pool

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


def grow_group(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]],
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
    return DEFAULTS[column.kind][1] if column is not None else 1


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


def repeat_keys(schema: Schema, order: list[str], data: dict[str, list[tuple[Any, ...]]],
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
